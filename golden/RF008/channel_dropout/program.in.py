"""Negative: a scheduled Dropout2d zeroes whole channels, which ScheduledDropout's mask does not
do: the rule names the module and leaves it alone."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.drop = nn.Dropout2d(0.2)

    def forward(self, x):
        return self.drop(self.conv(x)).mean()


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model)
x = torch.randn(2, 3, 8, 8)
for step in range(4):
    model.drop.p = 0.2 - 0.05 * step
    compiled(x)
