"""An RNN cell unrolled over the sequence with `range(x.size(1))` inside the compiled code: the
sequence length is specialised by the loop, so only the batch dimension can be dynamic."""

import torch
from torch import nn


class Unrolled(nn.Module):
    def __init__(self, dim=4, hidden=8):
        super().__init__()
        self.cell = nn.RNNCell(dim, hidden)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.cell.hidden_size)
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
        return h


torch.manual_seed(0)
model = torch.compile(Unrolled())
outputs = []
for batch, steps in [(4, 5), (4, 6), (4, 7), (3, 7), (5, 7)]:
    x = torch.randn(batch, steps, 4)
    torch._dynamo.mark_dynamic(x, 0)
    outputs.append(model(x))
print([tuple(o.shape) for o in outputs])
