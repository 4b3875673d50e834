"""A config field the first forward defaults lazily: the second call fails the guard
`self.config.scale is None` and compiles the model again."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    width: int = 8
    scale: float | None = None


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.fc = nn.Linear(config.width, config.width)

    def forward(self, x):
        if self.config.scale is None:
            self.config.scale = 0.5
        return self.fc(x) * self.config.scale


torch.manual_seed(0)
model = Model(Config())
compiled = torch.compile(model)
x = torch.randn(4, 8)
for _ in range(5):
    compiled(x)
