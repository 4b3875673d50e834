import torch


@torch.compile
def gn(y):
    return y * 2


def run():
    for n in (6, 7):
        y = torch.ones(n, 2)
        gn(y)
