import torch
from torch import nn


class NoisyBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        print("block input", tuple(x.shape))
        return x + torch.relu(self.lin(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(NoisyBlock(8) for _ in range(6))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


net = torch.compile(Net().eval())
with torch.no_grad():
    net(torch.randn(2, 8))
