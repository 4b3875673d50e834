import torch

torch._dynamo.config.cache_size_limit = 16


@torch.compile(dynamic=False)
def gn(x):
    return x + 1


for i in range(1, 10):
    gn(torch.ones(i))
