"""Decoding with a key/value cache that each layer indexes by its own number: compiled one by
one, every layer would compile on its own (the cache's state differs per layer), so RF007
offers no fix while the cache is on; RF004 is only unsafe (the program trains)."""

import torch
from torch import nn


class Cache:
    def __init__(self):
        self.keys = {}

    def update(self, k, layer_idx):
        if layer_idx in self.keys:
            self.keys[layer_idx] = torch.cat([self.keys[layer_idx], k], dim=1)
        else:
            self.keys[layer_idx] = k
        return self.keys[layer_idx]


class Layer(nn.Module):
    def __init__(self, width, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.k = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x, cache=None):
        k = self.k(x)
        if cache is not None:
            k = cache.update(k, self.layer_idx)
        return x + self.out(k.mean(dim=1, keepdim=True))


class Decoder(nn.Module):
    def __init__(self, width=8, depth=4):
        super().__init__()
        self.layers = nn.ModuleList([Layer(width, i) for i in range(depth)])

    def forward(self, x, cache=None):
        for layer in self.layers:
            x = layer(x, cache)
        return x


torch.manual_seed(0)
decoder = Decoder()
compiled = torch.compile(decoder)
cache = Cache()
loss = sum(compiled(torch.randn(2, 1, 8), cache).pow(2).mean() for _ in range(2))
loss.backward()
