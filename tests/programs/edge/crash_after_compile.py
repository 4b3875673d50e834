import torch


@torch.compile
def fn(x):
    return x * 2


fn(torch.ones(3))
fn(torch.ones(5))
raise RuntimeError("the training run fell over")
