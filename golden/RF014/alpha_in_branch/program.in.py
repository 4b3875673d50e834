"""A fade-in alpha that the forward also tests in a Python branch (skip the old path once the fade
is done): a 0-d tensor there would break the graph, so the float stays."""

import torch
import torch.nn as nn


class Blend(nn.Module):
    def __init__(self):
        super().__init__()
        self.new = nn.Linear(8, 8)
        self.old = nn.Linear(8, 8)
        self.alpha = 0.0

    def forward(self, x):
        if self.alpha >= 1.0:
            return self.new(x)
        return self.alpha * self.new(x) + (1 - self.alpha) * self.old(x)


torch.manual_seed(0)
model = Blend()
compiled = torch.compile(model, backend="eager")
outputs = []
for step in range(5):
    model.alpha = min(1.0, step / 3)
    outputs.append(compiled(torch.randn(2, 8)))
