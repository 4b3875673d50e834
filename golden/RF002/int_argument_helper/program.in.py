"""An int argument under dynamic=False, passed on to a helper that adds it to an int32 tensor."""

import torch


def shift(values, k):
    return values + k


@torch.compile(dynamic=False)
def step(x, k):
    return shift(x, k) * 2


x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
for k in range(1, 5):
    step(x, k=k)
