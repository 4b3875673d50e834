"""`@torch.compile` on the model's forward, trained: the decorator moves onto the block's
forward, so each block is compiled (once for all of them) instead of the whole model."""

import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.proj(self.norm(x)))


class Tower(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.blocks = nn.ModuleList()
        for _ in range(4):
            self.blocks.append(Residual(width))
        self.out = nn.Linear(width, 1)

    @torch.compile
    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.out(x)


torch.manual_seed(0)
tower = Tower()
optimizer = torch.optim.Adam(tower.parameters(), lr=1e-2)
losses = []
for _ in range(3):
    loss = tower(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
