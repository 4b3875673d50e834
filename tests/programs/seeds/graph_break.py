import torch


def very_large_function(x):
    return x + 1


@torch.compile(dynamic=False)
def fn(x, c):
    y = very_large_function(x)  # recompiled every time
    return y + c


for i in range(1, 5):
    fn(torch.ones(3), i)


@torch.compile(dynamic=False)
def gn(x, c):
    y = very_large_function(x)  # compiled only once
    torch._dynamo.graph_break()
    return y + c  # recompiled every time


for i in range(1, 5):
    gn(torch.ones(3), i)
