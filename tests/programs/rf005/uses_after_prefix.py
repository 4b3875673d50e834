"""RF005 shapes beyond the seed: a value first used inside a function the frame calls, a global
int, and a frame with no prefix to shield."""

import torch

N = 1


def tail(z, c):
    return z * c


@torch.compile(dynamic=False)
def fn(x, c):
    y = torch.sin(x)
    z = torch.cos(y)
    return tail(z, c)


@torch.compile
def gn(x):
    y = torch.tanh(x) @ x.T
    return y + N


@torch.compile(dynamic=False)
def hn(x, k):
    return x * k


for c in (1, 2, 3):
    fn(torch.ones(3), c)
    hn(torch.ones(3), c)
for N in (1, 2, 3):
    gn(torch.ones(3, 3))
