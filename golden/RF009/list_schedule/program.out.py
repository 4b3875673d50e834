"""A warm-up schedule held as a Python list and indexed by the step inside a compiled function
with dynamic=False: every step recompiles until the recompile limit."""

import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("warmup", torch.tensor([min(1.0, 0.1 * (i + 1)) for i in range(12)], dtype=torch.float64), persistent=False)

    def forward(self, x, step):
        return self.proj(x) * torch.take(self.warmup, torch.as_tensor(step, device=self.warmup.device))


torch.manual_seed(0)
model = Scaled()
compiled = torch.compile(model, dynamic=False)
x = torch.randn(4, 8)
for step in range(12):
    compiled(x, torch.tensor(step))
