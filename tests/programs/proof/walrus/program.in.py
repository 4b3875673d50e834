import torch


@torch.compile
def f(x, c):
    return x * c


RESULTS = []
for n in (3, 4, 5):
    RESULTS.append(f(x := torch.ones(n), 0.5))
print(x.shape)
