"""A loss scaled by a module-level weight that a schedule anneals and the loop prints (RF015's
`dynamic=True` at the compile call: unproven, `fix` tries it), whose log of a negative number is NaN on every call: a
run with the fix compiles once, and its NaN "equals" the NaN before. No evidence of the values."""

import torch

WEIGHT = 0.1


@torch.compile(backend="eager")
def loss(x):
    return torch.log(x - 10.0).sum() * WEIGHT


results = []
for step in range(4):
    WEIGHT = 0.1 * (step + 1)
    results.append(loss(torch.ones(3)))
    print("weight", WEIGHT)
print([float(r) for r in results])
