"""torch._dynamo.reset() between two phases (as test suites and notebooks do): frame and compile
ids start again at 0, guard_failures and the compile callbacks are cleared."""
import torch


@torch.compile(dynamic=False)
def f(x):
    return x + 1


@torch.compile(dynamic=False)
def g(x, c):
    return x * c


f(torch.ones(2))
f(torch.ones(3))
f(torch.ones(4))
torch._dynamo.reset()
g(torch.ones(2), 2)
g(torch.ones(2), 3)
f(torch.ones(5))
f(torch.ones(6))
