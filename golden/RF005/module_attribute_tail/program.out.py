import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))
        self.norm = nn.LayerNorm(8)
        self.shift = 0

    def forward(self, x):
        h = self.norm(x + self.body(x))
        h = torch.softmax(h, dim=-1)
        torch._dynamo.graph_break()
        return torch.roll(h, self.shift, dims=-1)


encoder = Encoder()
compiled = torch.compile(encoder)
for shift in range(4):
    encoder.shift = shift
    compiled(torch.randn(2, 8))
