"""A schedule held as a numpy array and indexed by the epoch inside the compiled forward: the
numpy index breaks the graph and the epoch recompiles the frame."""

import numpy as np
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.schedule = np.linspace(1.0, 0.1, 20)

    def forward(self, x, epoch):
        h = self.fc(x)
        t = self.schedule[epoch]
        return h * t


torch.manual_seed(0)
model = torch.compile(Model())
x = torch.randn(4, 8)
for epoch in range(10):
    model(x, epoch)
