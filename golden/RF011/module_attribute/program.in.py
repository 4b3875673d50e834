"""A module whose int attribute changes, compiled with torch's filter that skips the guards on
nn.Modules: one compile, and the first value's answer every time."""

import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1

    def forward(self, x):
        return x * self.scale


model = Scaled()
compiled = torch.compile(
    model, options={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
)
x = torch.ones(1)
outputs = []
for scale in (1, 2, 3, 4):
    model.scale = scale
    outputs.append(compiled(x))
print([int(o.item()) for o in outputs])
