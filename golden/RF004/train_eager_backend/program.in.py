"""A training step compiled with backend="eager" through a stack of blocks. On torch 2.8 to
2.13, backward through a nested compile region compiled with the eager backend fails
(AssertionError: fake_mode should be enabled for HOPs), so RF004 offers no fix here, safe or
unsafe. (The step function is what is compiled, not the model, so RF007 has nothing to
replace either.)"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(8) for _ in range(4))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def loss_of(x, y):
    return (model(x) - y).pow(2).mean()


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(loss_of, backend="eager")
for _ in range(2):
    loss = step(torch.randn(4, 8), torch.randn(4, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
