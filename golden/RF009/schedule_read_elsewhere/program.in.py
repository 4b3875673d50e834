"""Negative: the schedule is also read as a list (its length clamps the index), so it cannot
become a tensor by a local edit."""

import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.warmup = [0.25, 0.5, 0.75, 1.0]

    def forward(self, x, step):
        return self.proj(x) * self.warmup[step]

    def last_step(self):
        return len(self.warmup) - 1


torch.manual_seed(0)
model = Scaled()
compiled = torch.compile(model, dynamic=False)
x = torch.randn(4, 8)
for step in range(6):
    compiled(x, min(step, model.last_step()))
