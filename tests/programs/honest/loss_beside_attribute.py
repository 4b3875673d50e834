"""Manifold mixup (a new user's trial): the model mixes hidden features with a per-step float
kept on the module, and the training loop weighs the two losses with the same float, outside
compiled code. A float64 0-d tensor in its place leaves the compiled outputs and the weights as
they were, but makes the loop's losses float64."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)


class MixNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)
        self.lam = 1.0
        self.perm = None

    def forward(self, x):
        h = torch.relu(self.body(x))
        if self.perm is not None:
            h = self.lam * h + (1 - self.lam) * h[self.perm]
        return self.head(h)


model = MixNet()
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
X, Y = torch.randn(32, 8), torch.randint(0, 4, (32,))
losses = []
for step in range(4):
    model.lam = float(rng.beta(2.0, 2.0))
    model.perm = torch.randperm(32)
    out = compiled(X)
    loss = model.lam * F.cross_entropy(out, Y) + (1 - model.lam) * F.cross_entropy(out, Y[model.perm])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
print("loss", float(sum(losses)))
