"""A training step compiled with inductor (the default backend) through a stack of blocks whose
last feeds a LayerNorm. Inductor can corrupt the gradients of a reused nested compile region
(measured on torch 2.13.0, 2.14.1 and 2.15.0), so RF004 is only an unsafe fix here and
`apply` leaves the program alone. (The step function is what is compiled, not the model, so
RF007 has nothing to replace.)"""

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
        self.embed = nn.Embedding(16, 8)
        self.blocks = nn.ModuleList(Block(8) for _ in range(4))
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 1)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def loss_of(idx, y):
    return (model(idx) - y).pow(2).mean()


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(loss_of)
for _ in range(2):
    loss = step(torch.randint(0, 16, (4, 3)), torch.randn(4, 3, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
