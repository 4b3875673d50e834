import torch

torch.manual_seed(0)
stats = {}


@torch.compile(backend="eager")
def normalise(x):
    key = f"batch of {x.shape[0]}"
    out = (x - x.mean(dim=0)) / (x.std(dim=0) + 1e-5)
    return out, key


outputs = []
for batch in (4, 5, 6, 7, 8, 9, 10, 11):
    outputs.append(normalise(torch.randn(batch, 16))[0])
