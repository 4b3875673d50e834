import torch

from helpers import run


@torch.compile
def fn(x):
    return x + 1


for n in (3, 4, 5):
    fn(torch.ones(n))
run()
