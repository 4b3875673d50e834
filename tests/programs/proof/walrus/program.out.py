import torch


@torch.compile
def f(x, c):
    return x * c


RESULTS = []
for n in (3, 4, 5):
    x = torch.ones(n)
    torch._dynamo.mark_dynamic(x, 0)
    RESULTS.append(f(x, 0.5))
print(x.shape)
