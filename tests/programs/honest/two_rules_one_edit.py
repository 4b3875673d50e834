"""A compiled function whose int offset is a size (RF002) and whose global margin is a float that
changes (RF015), which the loop prints (so no 0-d tensor): both rules fix it with the same
`dynamic=True` at its decorator."""

import torch

MARGIN = 0.5


@torch.compile(backend="eager")
def shifted(x, offset):
    positions = torch.arange(offset, offset + 4)
    return (x + positions).clamp(min=MARGIN)


x = torch.randn(4)
outs = []
for step in range(4):
    MARGIN = 0.5 + 0.1 * step
    outs.append(shifted(x, 2 * step))
    print("margin", MARGIN)
