import torch
from torch import nn


class ConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        return x + torch.relu(self.bn(self.conv(x)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*(ConvBlock(4) for _ in range(5)))
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = self.blocks(x)
        return self.head(x.mean(dim=-1))


def loss_of(x):
    return model(x).pow(2).mean()


model = ConvNet().train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(loss_of)
for _ in range(2):
    loss = step(torch.randn(3, 4, 10))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
