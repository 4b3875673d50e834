"""A model whose file shows no training: the stack of blocks RF004 regions."""

from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return x + self.lin(self.norm(x))


class Model(nn.Module):
    def __init__(self, width=8, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)
