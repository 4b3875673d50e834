import torch
torch._dynamo.utils.set_compilation_metrics_limit(1000)
@torch.compile(dynamic=False)
def f(x):
    return x + 1
for n in (2, 3):
    f(torch.ones(n))
