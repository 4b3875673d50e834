"""A program that clears dynamo's counters midway (as torch's own benchmarks do between runs)."""
import torch


@torch.compile(dynamic=False)
def f(x):
    return x + 1


f(torch.ones(2))
f(torch.ones(3))
torch._dynamo.utils.counters.clear()
f(torch.ones(4))
f(torch.ones(5))
