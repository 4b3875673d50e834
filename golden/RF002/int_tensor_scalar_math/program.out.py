"""An unsafe fix (applied with --unsafe-fixes): a float that meets an int64 tensor after Python
arithmetic. A float64 0-d tensor would make the result float64, so the tensor keeps the default
dtype, and `c / 3` then runs in float32 instead of double."""

import torch


@torch.compile(dynamic=False)
def weigh(counts, c):
    return counts * (c / 3)


counts = torch.arange(6)
for c in (0.7, 1.3, 2.9):
    weigh(counts, torch.tensor(c))
