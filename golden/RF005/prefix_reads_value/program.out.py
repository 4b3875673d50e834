import torch


@torch.compile(dynamic=False)
def fn(x, n):
    steps = n
    y = torch.sin(x)
    return y * steps


for n in (1, 2, 3):
    fn(torch.ones(4), n)
