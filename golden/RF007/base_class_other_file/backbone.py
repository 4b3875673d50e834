"""The blocks are built by a parent class's __init__, in a file of its own."""

from torch import nn


class MLPBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.fc2(nn.functional.silu(self.fc1(x)))


class Backbone(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.blocks = nn.ModuleList(MLPBlock(width) for _ in range(depth))
