"""Negative: Whisper's decoder compiled on its own, stepped by hand with a cache that holds no
layer until the first step fills it (transformers' DynamicCache). The keys' length changes, but
a mark on `cache.self_attention_cache.layers[0].keys` before the call would raise IndexError at
that first step: unproven, so safe `apply` leaves it (and `fix` drops it after the run fails)."""

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

torch.manual_seed(0)
config = WhisperConfig(
    d_model=32,
    encoder_layers=1,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    vocab_size=100,
    num_mel_bins=16,
    max_source_positions=20,
    max_target_positions=32,
    decoder_start_token_id=1,
    pad_token_id=0,
)
model = WhisperForConditionalGeneration(config).eval()
decoder_step = torch.compile(model.model.decoder, backend="eager")

features = torch.randn(1, 16, 40)
tokens = [1]
with torch.no_grad():
    encoded = model.model.encoder(features).last_hidden_state
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    for step in range(6):
        out = decoder_step(
            input_ids=torch.tensor([[tokens[-1]]]),
            encoder_hidden_states=encoded,
            past_key_values=cache,
            cache_position=torch.tensor([step]),
            use_cache=True,
        )
        tokens.append(int(model.proj_out(out.last_hidden_state)[0, -1].argmax()))
print(tokens)
