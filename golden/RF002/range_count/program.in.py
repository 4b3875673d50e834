"""Negative: an int that reaches range() cannot become a tensor (the loop needs a Python int)."""

import torch


@torch.compile
def repeat_double(x, n):
    for _ in range(n):
        x = x * 2
    return x


x = torch.ones(3)
for n in (1, 2, 3, 4):
    repeat_double(x, n)
