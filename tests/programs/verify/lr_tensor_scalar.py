"""The compiled-optimizer recipe with the backward in the compiled step (dynamic=None). A tensor lr
removes Adam.step's recompile and adds Optimizer._to_scalar, a frame that compiles once."""

import torch
from torch import nn
from torch.optim.lr_scheduler import ExponentialLR

torch.manual_seed(0)
model = nn.Linear(8, 4)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = ExponentialLR(opt, gamma=0.9)

@torch.compile
def step(x):
    model(x).sum().backward()
    opt.step()
    sched.step()

for _ in range(5):
    step(torch.randn(16, 8))
print(model.weight.sum().item())
