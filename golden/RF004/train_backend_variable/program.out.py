"""A training script that takes its backend from the command line (`--backend`, "eager" by
default), as most training scripts do, and builds its blocks from a config. The source names no
backend and no number of blocks; the run records both (the backend torch compiled each frame
with, and the four blocks it saw in the model). With the eager backend on torch before 2.14,
backward through a nested compile region fails, so RF004 offers no fix, safe or unsafe."""

import argparse
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    width: int = 8
    depth: int = 4


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.blocks = nn.ModuleList(Block(config.width) for _ in range(config.depth))
        self.head = nn.Linear(config.width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net(Config())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def loss_of(x, y):
        return (model(x) - y).pow(2).mean()

    step = torch.compile(loss_of, backend=args.backend)
    for _ in range(args.steps):
        loss = step(torch.randn(4, 8), torch.randn(4, 1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
