"""A model whose forward a library decorator wraps (transformers' `can_return_tuple`): the
compiled frame is the library's `wrapper`, but the lazy default it recompiles for is the
program's own, first used in this file."""

import torch
from torch import nn
from transformers.utils.generic import can_return_tuple


class Head(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.scale = None

    @can_return_tuple
    def forward(self, x):
        if self.scale is None:
            self.scale = 0.5
        return self.proj(x) * self.scale


torch.manual_seed(0)
model = Head(8)
compiled = torch.compile(model)
outputs = [compiled(torch.randn(4, 8)) for _ in range(3)]
print([round(o.sum().item(), 4) for o in outputs])
