"""Prefill and decode with a key/value cache object passed as `past_key_values=`: each layer's
keys and values grow with the attention mask, and two prompt lengths are decoded."""

import torch
from torch import nn


class CacheLayer:
    def __init__(self):
        self.keys = None
        self.values = None

    def update(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values


class Cache:
    def __init__(self, num_layers):
        self.layers = [CacheLayer() for _ in range(num_layers)]


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, h, mask, layer):
        q, k, v = self.qkv(h).unsqueeze(1).chunk(3, dim=-1)
        k, v = layer.update(k, v)
        scores = q @ k.transpose(-1, -2) + (1 - mask[:, None, None, :]) * -1e4
        return (scores.softmax(-1) @ v).squeeze(1)


class TinyDecoder(nn.Module):
    def __init__(self, vocab=16, dim=8, num_layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Attention(dim) for _ in range(num_layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask, past_key_values):
        h = self.embed(input_ids)
        for block, layer in zip(self.blocks, past_key_values.layers):
            h = h + block(h, attention_mask, layer)
        return self.head(h)


torch.manual_seed(0)
model = torch.compile(TinyDecoder().eval())


@torch.no_grad()
def generate(prompt, new_tokens):
    cache = Cache(num_layers=2)
    mask = torch.ones(prompt.shape)
    torch._dynamo.mark_dynamic(prompt, 1)
    torch._dynamo.mark_dynamic(mask, 1)
    logits = model(input_ids=prompt, attention_mask=mask, past_key_values=cache)
    next_id = logits[:, -1:].argmax(-1)
    tokens = [next_id]
    for _ in range(new_tokens - 1):
        mask = torch.cat([mask, torch.ones(next_id.shape)], dim=1)
        torch._dynamo.maybe_mark_dynamic(mask, 1)
        for layer in cache.layers:
            torch._dynamo.maybe_mark_dynamic(layer.keys, 2)
            torch._dynamo.maybe_mark_dynamic(layer.values, 2)
        logits = model(input_ids=next_id, attention_mask=mask, past_key_values=cache)
        next_id = logits[:, -1:].argmax(-1)
        tokens.append(next_id)
    return torch.cat(tokens, dim=1)


for length in (4, 6):
    print(generate(torch.randint(0, 16, (2, length)), new_tokens=5).tolist())
