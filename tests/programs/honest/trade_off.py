"""Only a trade-off fixes this: `c` drives a Python loop (no tensor can stand for it), so `fn`
compiles once per value; RF005 could split the frame with a graph break, which safe `fix` does
not try (issue 30, cause 9)."""

import torch


def very_large_function(x):
    return torch.sin(x) * 2 + 1


@torch.compile(dynamic=False)
def fn(x, c):
    y = very_large_function(x)
    for _ in range(c):
        y = y * 0.5
    return y


torch.manual_seed(0)
outputs = [fn(torch.randn(3), i) for i in range(1, 5)]
