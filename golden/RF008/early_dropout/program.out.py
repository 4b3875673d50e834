"""Early dropout: a schedule lowers `model.drop.p` before every training step, and each new p
recompiles the compiled model until the recompile limit."""

import torch
from torch import nn


class ScheduledDropout(nn.Dropout):
    """nn.Dropout whose `p` a schedule changes between calls of compiled code, without a
    recompile per value: `p` lives in a 0-d float64 buffer (a graph input, not a constant
    torch guards on), and two bools say whether to draw a mask at all, so p == 0 draws no
    random numbers and p == 1 zeroes, as F.dropout does. The mask is F.dropout's:
    bernoulli(1 - p), scaled by 1 / (1 - p)."""

    @property
    def p(self):
        return self._p

    @p.setter
    def p(self, value):
        # nn.Dropout.__init__ sets p first; every schedule update after it lands here too.
        self._p = value
        if "p_tensor" in self._buffers:
            self.p_tensor.fill_(value)
        else:
            self.register_buffer("p_tensor", torch.tensor(value, dtype=torch.float64), persistent=False)
        self.drops = bool(value > 0)
        self.drops_all = bool(value == 1)

    def forward(self, input):
        if not self.training or not self.drops:
            return input
        if self.drops_all:
            return input.mul_(0.0) if self.inplace else input * 0.0
        keep = 1 - self.p_tensor
        mask = torch.empty_like(input).bernoulli_(keep).div_(keep)
        return input.mul_(mask) if self.inplace else input * mask


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop = ScheduledDropout(0.3)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for step in range(10):
    model.drop.p = 0.3 - 0.03 * step
    loss = ((compiled(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
