import torch


def prefix(x):
    return torch.cos(x) * 2


@torch.compile(dynamic=False, fullgraph=True)
def fn(x, k):
    y = prefix(x)
    return y * k


for k in (1, 2, 3):
    fn(torch.ones(4), k)
