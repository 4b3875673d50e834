"""A compiled helper that views its input by a shape passed as Python ints, the size it changes
along with the tensor's (found by a trial): marking the tensor would not help (the int is
specialised at the first compile) and `mark_dynamic` raises (ConstraintViolationError)."""

import torch


@torch.compile(backend="eager")
def split_heads(x, shape):
    return x.view(shape).transpose(1, 2)


for T in (8, 16):
    x = torch.randn(2, T, 32)
    print(split_heads(x, (2, T, 4, 8)).shape)
