"""A loss that counts its calls, whose nn.Module base comes from the project's package by star
import (`from losses import *`, which itself does `from .base import *`, as its `__all__` allows):
the counter becomes a buffer, not a global config flag."""

import torch

from losses import *  # noqa: F403


class WarmupLoss(BaseLoss):  # noqa: F405
    def __init__(self, warmup_steps=8):
        super().__init__()
        self.warmup_steps = warmup_steps
        self.num_iter = 0

    def forward(self, pred, target):
        self.num_iter += 1
        weight = torch.clamp(torch.ones(1) * self.num_iter / self.warmup_steps, max=1.0)
        return ((pred - target) ** 2).mean() * weight


torch.manual_seed(0)
criterion = WarmupLoss()
compiled = torch.compile(criterion)
pred, target = torch.randn(4, 3), torch.randn(4, 3)
for step in range(6):
    compiled(pred, target)
