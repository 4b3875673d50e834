"""A model whose stack of blocks comes from a parent class in another file (backbone.py),
trained with the whole model compiled: the recorder sees the stack in the compiled module, and
the blocks are compiled one by one where this program compiled the model."""

import torch
from torch import nn

from backbone import Backbone


class Regressor(Backbone):
    def __init__(self):
        super().__init__(width=8, depth=4)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


torch.manual_seed(0)
regressor = Regressor()
optimizer = torch.optim.SGD(regressor.parameters(), lr=0.05)
for block in regressor.blocks:
    block.compile()
train_step = regressor
losses = []
for _ in range(3):
    loss = (train_step(torch.randn(5, 8)) - 1).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
