"""Negative: a rotary cache built lazily from the first input's length needs an input to be
built, so the rule says where to build it and edits nothing."""

import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.cos_cached = None

    def forward(self, x):
        if self.cos_cached is None:
            positions = torch.arange(x.shape[1], dtype=torch.float32)
            self.cos_cached = torch.cos(positions)[:, None]
        return x * self.cos_cached


torch.manual_seed(0)
compiled = torch.compile(Rotary(8))
x = torch.randn(2, 6, 8)
for _ in range(3):
    compiled(x)
