import torch
import torch.nn.functional as F
from torch import nn


class Residual(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.scale = 0.5

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return x + self.scale * F.silu(self.proj(x))


class Stack(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.Sequential(*[Residual(width) for _ in range(depth)])
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return self.out(self.layers(x))


net = Stack(8, 6).eval()
net.compile()
with torch.no_grad():
    net(torch.randn(3, 8))
    net(torch.randn(3, 8))
