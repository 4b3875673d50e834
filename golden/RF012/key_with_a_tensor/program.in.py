"""The same options, but the `padding` key carries a tensor when it is there: absent and present
are two graphs whatever the key set, so no edit."""

import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, **kwargs):
        h = self.proj(x)
        if kwargs.get("cond") is not None:
            h = h + kwargs["cond"]
        if kwargs.get("padding") is not None:
            h = h * kwargs["padding"]
        return h


torch.manual_seed(0)
model = Denoiser()
compiled = torch.compile(model, backend="eager")
x = torch.randn(4, 8)
extra = {"cond": torch.randn(4, 8)}
outputs = []
for step in range(4):
    if step % 2 == 1:
        extra.update(padding=torch.ones(4, 8))
    else:
        extra.pop("padding", None)
    outputs.append(compiled(x, **extra))
