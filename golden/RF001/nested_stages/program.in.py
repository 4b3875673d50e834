import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc(torch.relu(self.norm(x)))


class Net(nn.Module):
    """Stages of blocks: a ModuleList of ModuleLists, as UNets and hierarchical vision models keep them."""

    def __init__(self, width=16, stages=2, depth=3):
        super().__init__()
        self.stages = nn.ModuleList(nn.ModuleList(Block(width) for _ in range(depth)) for _ in range(stages))
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        for stage in self.stages:
            for block in stage:
                x = block(x)
        return self.head(x)


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend="eager")
data = torch.randn(70, 16)
outputs = []
for start in range(0, len(data), 32):  # a ragged last batch: 32, 32, 6
    batch = data[start : start + 32]
    outputs.append(compiled(batch))
