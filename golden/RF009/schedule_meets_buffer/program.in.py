"""A warm-up schedule held as a Python list and indexed by the step, whose value meets a
registered buffer (a per-channel gain): every step recompiles with dynamic=False."""

import torch
from torch import nn


class Gained(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 8))
        self.warmup = [min(1.0, 0.1 * (i + 1)) for i in range(6)]

    def forward(self, x, step):
        return x * (self.gain * self.warmup[step])


torch.manual_seed(0)
model = Gained()
compiled = torch.compile(model, dynamic=False)
x = torch.randn(4, 8)
for step in range(6):
    compiled(x, step)
