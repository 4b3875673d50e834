"""A denoiser whose attention options gain `padding` and `max_seqlen` keys on some steps and lose
them on others (the wrapper `update()`s them when the packed sequence needs padding and `pop()`s
them when not), read with `kwargs.get(...)`: the key set flips, and the compiled forward compiles
again. Torch's guard names only `padding`."""

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
        extra.update(padding=None, max_seqlen=None)
    else:
        extra.pop("padding", None)
        extra.pop("max_seqlen", None)
    outputs.append(compiled(x, **{"max_seqlen": None, "padding": None, **extra}))
