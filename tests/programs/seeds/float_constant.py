import torch


@torch.compile
def fn(x, c):
    return x + c


for i in range(5):
    fn(torch.ones(i), 0.5 + i)
