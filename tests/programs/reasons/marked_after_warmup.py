"""A warm-up call with an unmarked tensor, then the same size marked dynamic (RC024): torch guards
the mark and compiles again."""

import torch


@torch.compile(backend="eager")
def f(x):
    return x * 2


f(torch.randn(4, 3))  # a warm-up, unmarked
x = torch.randn(4, 3)
torch._dynamo.mark_dynamic(x, 0)
f(x)
