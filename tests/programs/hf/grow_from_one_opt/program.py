"""Greedy decoding without a cache from a single start token (the sequence dim is 1
on the first call): a tiny OPT compiled with the default dynamic=None."""

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
model = torch.compile(model, backend="eager")


@torch.no_grad()
def greedy(start, new_tokens):
    ids = start
    for _ in range(new_tokens):
        mask = torch.ones_like(ids)
        logits = model(input_ids=ids, attention_mask=mask).logits
        ids = torch.cat([ids, logits[:, -1:].argmax(-1)], dim=1)
    return ids


start = torch.full((2, 1), config.bos_token_id)
tokens = greedy(start, new_tokens=8)
results = {"tokens": tokens}
print(tokens.tolist())
