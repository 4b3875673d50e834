import torch


@torch.compile(dynamic=False)
def fn(x):
    return x + 1


for i in range(1, 10):
    # recompile every time due to dynamic=False
    fn(torch.ones(i))
