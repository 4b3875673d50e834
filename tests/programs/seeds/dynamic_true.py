import torch


@torch.compile(dynamic=True)
def gn(x):
    return x + 1


gn(torch.ones(3))
gn(torch.ones(4))
