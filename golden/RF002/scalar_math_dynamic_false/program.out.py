"""A float argument under dynamic=False, with Python arithmetic on it before it meets the tensor."""

import math

import torch


@torch.compile(dynamic=False)
def blend(x, c):
    return torch.tanh(x * (c * c) + math.pi * c)


torch.manual_seed(0)
x = torch.randn(4, 8)
for step in range(5):
    blend(x, torch.tensor(0.1 * (step + 1), dtype=torch.float64))
