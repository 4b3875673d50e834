"""A compiled training step (dynamic=False) whose SGD learning rate (left to its default) follows
a cosine schedule stepped outside the compiled function: SGD's `step` recompiles every step."""

import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR


def build(model):
    optimizer = torch.optim.SGD(
        model.parameters(),
        weight_decay=1e-4,
        lr=torch.tensor(0.001, dtype=torch.float64),
    )
    return optimizer, CosineAnnealingLR(optimizer, T_max=10)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
optimizer, scheduler = build(model)
inp, target = torch.randn(16, 8), torch.randn(16, 4)


@torch.compile(dynamic=False)
def train_step(inp, target):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inp), target)
    loss.backward()
    optimizer.step()
    return loss.detach(), model[0].weight.detach().clone()


for _ in range(5):
    train_step(inp, target)
    scheduler.step()
