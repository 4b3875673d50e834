"""Four dropouts under one schedule: every step sets p on each nn.Dropout of the model, and
torch names only the first dropout's guard at each recompile (the other three fail too)."""

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
        self.drop1 = ScheduledDropout(0.3)
        self.fc2 = nn.Linear(32, 32)
        self.drop2 = ScheduledDropout(0.3)
        self.fc3 = nn.Linear(32, 32)
        self.drop3 = ScheduledDropout(0.3)
        self.fc4 = nn.Linear(32, 4)
        self.drop4 = ScheduledDropout(0.3)

    def forward(self, x):
        x = self.drop1(torch.relu(self.fc1(x)))
        x = self.drop2(torch.relu(self.fc2(x)))
        x = self.drop3(torch.relu(self.fc3(x)))
        return self.drop4(self.fc4(x))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for step in range(6):
    p = 0.3 - 0.04 * step
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
    loss = ((compiled(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
