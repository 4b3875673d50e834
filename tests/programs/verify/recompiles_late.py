"""A compiled function that is warm after its first call, then recompiles on the third: with
`verify --fail-on-recompile` the third call fails."""

import torch


@torch.compile(dynamic=False)
def add_one(x):
    return x + 1


add_one(torch.ones(3))
add_one(torch.ones(3))
add_one(torch.ones(4))
print("done")
