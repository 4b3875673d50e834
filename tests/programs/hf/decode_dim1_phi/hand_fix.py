"""One call site for prefill and decode (the dim is the prompt length, then 1),
a DynamicCache passed as past_key_values: a tiny Phi."""

import torch
from transformers import DynamicCache, PhiConfig, PhiForCausalLM

torch.manual_seed(0)
config = PhiConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=128,
)
model = PhiForCausalLM(config).eval()
model = torch.compile(model, backend="eager")


def mark_cache_dynamic(cache):
    # empty before prefill; after it each layer's keys/values grow along the sequence dim (2)
    for layer in cache.layers:
        if layer.is_initialized:
            torch._dynamo.mark_dynamic(layer.keys, 2)
            torch._dynamo.mark_dynamic(layer.values, 2)


@torch.no_grad()
def greedy(prompt, steps):
    cache = DynamicCache(config=config)
    input_ids = prompt
    attention_mask = torch.ones_like(prompt)
    tokens = []
    for _ in range(steps):
        torch._dynamo.mark_dynamic(input_ids, 1)
        torch._dynamo.mark_dynamic(attention_mask, 1)
        mark_cache_dynamic(cache)
        out = model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        input_ids = out.logits[:, -1:].argmax(-1)
        attention_mask = torch.cat([attention_mask, torch.ones_like(input_ids)], dim=1)
        tokens.append(input_ids)
    return torch.cat(tokens, dim=1)


results = {}
for prompt_len in (6, 10):
    prompt = torch.randint(0, config.vocab_size, (2, prompt_len))
    results[f"prompt{prompt_len}"] = greedy(prompt, steps=8)
    print(prompt_len, results[f"prompt{prompt_len}"].tolist())
