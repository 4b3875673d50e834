import torch


@torch.compile
def f(x, c):
    return x * c


for n in (3, 4, 5):
    x = torch.ones(n)
    torch._dynamo.mark_dynamic(x, 0)
    print("sum", f(x, 0.5).sum().item())
