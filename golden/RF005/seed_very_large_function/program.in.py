import torch


def very_large_function(x):
    return x + 1


@torch.compile(dynamic=False)
def fn(x, c):
    y = very_large_function(x)  # recompiled every time
    return y + c


for i in range(1, 5):
    fn(torch.ones(3), i)
