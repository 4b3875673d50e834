"""A new user's trial (a timm ResNet, here five stride-2 convolutions): progressive resizing, the
image size grows per epoch. At 32 pixels the last feature map is 1x1, which torch specialises:
the graph traced dynamic at 40 holds sizes 33 and up only, so a mark at the first call (32)
gives a graph for 32 and below, and 40 compiles again: 2 compiles, marked or not."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
layers = []
channels = 3
for width in (8, 16, 16, 32, 32):
    layers += [nn.Conv2d(channels, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
    channels = width
model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for size in (32, 40, 48, 56):
    x = torch.randn(4, 3, size, size)
    loss = F.cross_entropy(compiled(x), torch.randint(0, 10, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
