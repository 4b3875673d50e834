"""A user's decoding module that holds the KV cache as an attribute, compiled whole:
a tiny Gemma inside it."""

import torch
from torch import nn
from transformers import DynamicCache, GemmaConfig, GemmaForCausalLM

torch.manual_seed(0)
config = GemmaConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=128,
)


class CachedDecoder(nn.Module):
    def __init__(self, lm, config):
        super().__init__()
        self.lm = lm
        self.cache = DynamicCache(config=config)

    def reset(self):
        self.cache = DynamicCache(config=config)

    def forward(self, input_ids, attention_mask):
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, past_key_values=self.cache, use_cache=True)
        return out.logits[:, -1:]


decoder = CachedDecoder(GemmaForCausalLM(config).eval(), config)
step = torch.compile(decoder, backend="eager")


def mark_cache_dynamic(cache):
    # the cached keys/values grow along the sequence dim (2) at every step
    for layer in cache.layers:
        torch._dynamo.mark_dynamic(layer.keys, 2)
        torch._dynamo.mark_dynamic(layer.values, 2)


@torch.no_grad()
def generate(prompt, max_new_tokens):
    decoder.reset()
    mask = torch.ones_like(prompt)
    torch._dynamo.mark_dynamic(prompt, 1)
    torch._dynamo.mark_dynamic(mask, 1)
    next_id = step(prompt, mask).argmax(-1)
    generated = [next_id]
    for _ in range(max_new_tokens - 1):
        mask = torch.cat([mask, torch.ones_like(next_id)], dim=1)
        torch._dynamo.mark_dynamic(mask, 1)
        mark_cache_dynamic(decoder.cache)
        next_id = step(next_id, mask).argmax(-1)
        generated.append(next_id)
    return torch.cat(generated, dim=1)


results = {}
for prompt_len in (5, 8):
    prompt = torch.randint(0, config.vocab_size, (2, prompt_len))
    results[f"prompt{prompt_len}"] = generate(prompt, max_new_tokens=6)
    print(prompt_len, results[f"prompt{prompt_len}"].tolist())
