"""A contrastive (InfoNCE) loss whose temperature is annealed per epoch, compiled on its own, as
SimCLR-style training loops set it: `loss_fn.temperature = ...` before each epoch."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class InfoNCE(nn.Module):
    def __init__(self, temperature=0.5):
        super().__init__()
        self.temperature = temperature

    def forward(self, a, b):
        a = F.normalize(a, dim=1)
        b = F.normalize(b, dim=1)
        logits = a @ b.t() / self.temperature
        targets = torch.arange(a.shape[0])
        return F.cross_entropy(logits, targets)


torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
loss_fn = InfoNCE()
compiled_loss = torch.compile(loss_fn, backend="eager")
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)

losses = []
for epoch in range(4):
    loss_fn.temperature = max(0.1, 0.5 * 0.7**epoch)
    for _ in range(2):
        x = torch.randn(8, 16)
        loss = compiled_loss(encoder(x + 0.1 * torch.randn(8, 16)), encoder(x))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
