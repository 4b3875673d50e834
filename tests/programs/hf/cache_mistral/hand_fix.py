"""Prefill + decode with a DynamicCache passed as past_key_values: a tiny Mistral."""

import torch
from transformers import DynamicCache, MistralConfig, MistralForCausalLM

torch.manual_seed(0)
config = MistralConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)
model = MistralForCausalLM(config).eval()
model = torch.compile(model, backend="eager")


def mark_cache_dynamic(cache):
    # the cached keys/values grow along the sequence dim (2) at every step
    for layer in cache.layers:
        torch._dynamo.mark_dynamic(layer.keys, 2)
        torch._dynamo.mark_dynamic(layer.values, 2)


@torch.no_grad()
def generate(prompt, max_new_tokens):
    cache = DynamicCache(config=config)
    mask = torch.ones_like(prompt)
    torch._dynamo.mark_dynamic(prompt, 1)
    torch._dynamo.mark_dynamic(mask, 1)
    out = model(input_ids=prompt, attention_mask=mask, past_key_values=cache, use_cache=True)
    next_id = out.logits[:, -1:].argmax(-1)
    generated = [next_id]
    for _ in range(max_new_tokens - 1):
        mask = torch.cat([mask, torch.ones_like(next_id)], dim=1)
        torch._dynamo.mark_dynamic(mask, 1)
        mark_cache_dynamic(cache)
        out = model(input_ids=next_id, attention_mask=mask, past_key_values=cache, use_cache=True)
        next_id = out.logits[:, -1:].argmax(-1)
        generated.append(next_id)
    return torch.cat(generated, dim=1)


results = {}
for prompt_len in (5, 9):
    prompt = torch.randint(0, config.vocab_size, (2, prompt_len))
    results[f"prompt{prompt_len}"] = generate(prompt, max_new_tokens=8)
    print(prompt_len, results[f"prompt{prompt_len}"].tolist())
