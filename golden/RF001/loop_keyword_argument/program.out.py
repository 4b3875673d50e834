import torch


@torch.compile
def normalize(x, *, eps):
    return (x - x.mean()) / (x.std() + eps)


results = []
for n in range(3, 8):
    batch = torch.linspace(0, 1, n)
    torch._dynamo.mark_dynamic(batch, 0)
    results.append(normalize(x=batch, eps=1e-5))
