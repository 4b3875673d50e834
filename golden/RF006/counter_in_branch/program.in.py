"""A module counter that also decides a Python branch: a tensor would break the branch, so the
counter stays an int and torch is told to treat it as dynamic instead."""

import torch
from torch import nn


class Smoother(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        self.calls += 1
        y = self.proj(x)
        if self.calls % 4 == 0:
            y = y - y.mean(dim=0)
        return y


torch.manual_seed(0)
model = torch.compile(Smoother())
x = torch.randn(3, 4)
for _ in range(8):
    model(x)
