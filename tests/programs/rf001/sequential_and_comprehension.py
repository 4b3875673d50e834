import torch
from torch import nn

seq = torch.compile(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
for n in (2, 3, 5):
    out = seq(torch.ones(n, 4))


@torch.compile(dynamic=False)
def double(x):
    return x * 2


results = [double(torch.ones(n)) for n in (2, 3, 4)]
