"""A compiled module called with a different softmax temperature each time."""

import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 5)

    def forward(self, x, temperature):
        logits = self.proj(x)
        return torch.softmax(logits / temperature, dim=-1)


torch.manual_seed(0)
head = torch.compile(Head(), dynamic=False)
x = torch.randn(2, 8)
for temperature in (0.5, 0.7, 1.0, 1.3):
    head(x, torch.tensor(temperature))
