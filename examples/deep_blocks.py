"""A deep stack of identical blocks: no recompiles, but compile time grows with depth.

`torch.compile(model)` traces all 8 blocks into one graph and the backend compiles each copy
separately. Nothing recompiles (1 compile for 2 calls of the same shape); the cost is the
single cold compile, which under inductor scales with the number of blocks.
"""

import torch
from torch import nn

NUM_BLOCKS = 8
WIDTH = 16


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class DeepModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(WIDTH) for _ in range(NUM_BLOCKS))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def main():
    torch.manual_seed(0)
    model = DeepModel().eval()
    compiled_model = torch.compile(model)
    inputs = [torch.randn(2, 4, WIDTH) for _ in range(2)]
    with torch.no_grad():
        outputs = [compiled_model(x) for x in inputs]
    return {"outputs": torch.stack(outputs)}


if __name__ == "__main__":
    main()
