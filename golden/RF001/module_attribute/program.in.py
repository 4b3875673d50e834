"""A decoding module that holds its key/value cache as an attribute (`self.cache`), compiled
whole: the prefill call and the decode call pass only ids and a mask, and the cache's layers
grow with the mask."""

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

    def forward(self, input_ids, attention_mask, cache):
        h = self.embed(input_ids)
        for block, layer in zip(self.blocks, cache.layers):
            h = h + block(h, attention_mask, layer)
        return self.head(h)


class CachedDecoder(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.cache = Cache(num_layers=2)

    def reset(self):
        self.cache = Cache(num_layers=2)

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids, attention_mask, self.cache)[:, -1:]


torch.manual_seed(0)
decoder = CachedDecoder(TinyDecoder().eval())
step = torch.compile(decoder)


@torch.no_grad()
def generate(prompt, new_tokens):
    decoder.reset()
    mask = torch.ones(prompt.shape)
    next_id = step(prompt, mask).argmax(-1)
    tokens = [next_id]
    for _ in range(new_tokens - 1):
        mask = torch.cat([mask, torch.ones(next_id.shape)], dim=1)
        next_id = step(next_id, mask).argmax(-1)
        tokens.append(next_id)
    return torch.cat(tokens, dim=1)


for length in (4, 6):
    print(generate(torch.randint(0, 16, (2, length)), new_tokens=5).tolist())
