"""A compiled function calls a module whose forward breaks its graph: torch compiles that forward
as a frame of its own, called from inside the compiled function. A mark before that call would
run in traced code ("Attempt to trace forbidden callable")."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        torch._dynamo.graph_break()
        return h.sum()


net = Net()


@torch.compile(backend="eager")
def compute(x, n):
    rows = x[:n]
    return net(rows)


for n in (2, 3, 4, 5):
    compute(torch.randn(8, 8), n)
