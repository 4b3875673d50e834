import torch
from torch import nn

NUM_BLOCKS = 8
WIDTH = 16


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.up(self.norm(x))
        return x + self.down(torch.nn.functional.gelu(h))


class DeepModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(WIDTH) for _ in range(NUM_BLOCKS))
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


model = DeepModel().eval()
compiled = torch.compile(model)
with torch.no_grad():
    for _ in range(2):
        compiled(torch.randn(2, 5, WIDTH))
