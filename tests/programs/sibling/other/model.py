"""Not part of the program: a stack of blocks static mode would region. Verify and fix must leave
it alone."""

from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return x + self.lin(x)


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(6))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
