"""A block that hands its `**kwargs` on to a gated MLP whose `gate` defaults to None; the caller
sets `gate=None` on some steps and drops it on others. The dict starts empty, so torch's guard is
`not kwargs`. The fix passes `gate` every time: unproven (the dict is passed on, where a
callee could tell an absent key from None), kept by `--unsafe-fixes` or a run of `fix`."""

import torch
from torch import nn


class GatedMLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x, gate=None):
        h = torch.nn.functional.silu(self.up(x))
        if gate is not None:
            h = h * gate
        return self.down(h)


class Block(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = GatedMLP(width)

    def forward(self, x, **kwargs):
        return x + self.mlp(self.norm(x), **kwargs)


torch.manual_seed(0)
block = torch.compile(Block(), backend="eager")
options = {}
x = torch.randn(2, 5, 16)
outputs = []
with torch.no_grad():
    for step in range(4):
        if step % 2:
            options["gate"] = None
        else:
            options.pop("gate", None)
        x = block(x, **options)
        outputs.append(x)
