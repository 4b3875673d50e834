"""A residual branch whose scale warms up from 0 over the first steps (as ReZero-style training
does), the scale set on the model before each compiled step."""

import torch
import torch.nn as nn


class WarmResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.scale = 0.0

    def forward(self, x):
        return x + self.scale * self.proj(x)


torch.manual_seed(0)
model = WarmResidual()
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(6):
    model.scale = min(1.0, step / 4)
    loss = compiled(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
