"""Greedy decoding with a tiny T5 (encoder-decoder): the decoder input grows from the
start token, two source batches of different lengths."""

import torch
from transformers import T5Config, T5ForConditionalGeneration

torch.manual_seed(0)
config = T5Config(
    vocab_size=128,
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_decoder_layers=2,
    num_heads=4,
    decoder_start_token_id=0,
    pad_token_id=0,
)
model = T5ForConditionalGeneration(config).eval()
model = torch.compile(model, backend="eager")


@torch.no_grad()
def translate(src, max_len):
    src_mask = torch.ones_like(src)
    decoder_input_ids = torch.full((src.shape[0], 1), config.decoder_start_token_id)
    for _ in range(max_len):
        torch._dynamo.mark_dynamic(src, 1)
        torch._dynamo.mark_dynamic(src_mask, 1)
        torch._dynamo.mark_dynamic(decoder_input_ids, 1)
        logits = model(
            input_ids=src, attention_mask=src_mask, decoder_input_ids=decoder_input_ids, use_cache=False
        ).logits
        next_token = logits[:, -1].argmax(-1, keepdim=True)
        decoder_input_ids = torch.cat([decoder_input_ids, next_token], dim=1)
    return decoder_input_ids


results = {}
for src_len in (7, 11):
    src = torch.randint(1, config.vocab_size, (2, src_len))
    results[f"src{src_len}"] = translate(src, max_len=6)
    print(src_len, results[f"src{src_len}"].tolist())
