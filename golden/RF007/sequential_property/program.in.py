"""Training through a stack kept in an nn.Sequential built from a comprehension and reached
through a property; the model is compiled in place with `model.compile()`, and the blocks are
compiled one by one instead."""

import torch
from torch import nn

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class Block(nn.Module):
    def __init__(self, width, act="gelu"):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)
        self.act = ACTIVATIONS[act]()

    def forward(self, x):
        return x + self.act(self.fc(self.norm(x)))


class Encoder(nn.Module):
    def __init__(self, width=8, depth=5):
        super().__init__()
        self.stack = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 2)

    @property
    def layers(self):
        return self.stack

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


torch.manual_seed(0)
encoder = Encoder()
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
encoder.compile()
losses = []
for _ in range(3):
    loss = encoder(torch.randn(3, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
