"""A module-level int step counter read by a compiled function: every step recompiles."""

import torch

STEP = torch.tensor(0)


@torch.compile
def warmup_scale(x):
    return x * STEP / 10 + x.sin()


def advance():
    global STEP
    STEP += 1


torch.manual_seed(0)
x = torch.randn(4, 4)
for _ in range(6):
    advance()
    warmup_scale(x)
