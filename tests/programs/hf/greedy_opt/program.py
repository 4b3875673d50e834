"""Greedy decoding without a KV cache: a tiny OPT compiled with dynamic=False."""

import torch
from transformers import OPTConfig, OPTForCausalLM

torch.manual_seed(0)
config = OPTConfig(
    vocab_size=128,
    hidden_size=32,
    num_hidden_layers=2,
    ffn_dim=64,
    num_attention_heads=4,
    max_position_embeddings=64,
    word_embed_proj_dim=32,
)
model = OPTForCausalLM(config).eval()
compiled = torch.compile(model, backend="eager", dynamic=False)


def greedy(prompt, new_tokens):
    ids = prompt
    mask = torch.ones_like(ids)
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = compiled(input_ids=ids, attention_mask=mask).logits
            next_id = logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_id], dim=1)
            mask = torch.cat([mask, torch.ones_like(next_id)], dim=1)
    return ids


prompt = torch.randint(0, config.vocab_size, (2, 6))
tokens = greedy(prompt, new_tokens=10)
results = {"tokens": tokens}
print(tokens.tolist())
