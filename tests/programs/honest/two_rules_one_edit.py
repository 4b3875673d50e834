"""A compiled function whose int offset is a size (RF002) and whose global margin is a float that
changes (RF015), which the loop prints (so no 0-d tensor): both rules fix it with the same
`dynamic=True` at its decorator. `dynamic_sources` cannot name the offset alone: another compiled
function has an argument of that name."""

import torch

MARGIN = 0.5


@torch.compile(backend="eager")
def shifted(x, offset):
    positions = torch.arange(offset, offset + 4)
    return (x + positions).clamp(min=MARGIN)


@torch.compile(backend="eager")
def head(x, offset):
    return x[offset : offset + 2].sum()


x = torch.randn(4)
outs = [head(x, 0)]
for step in range(4):
    MARGIN = 0.5 + 0.1 * step
    outs.append(shifted(x, 2 * step))
    print("margin", MARGIN)
