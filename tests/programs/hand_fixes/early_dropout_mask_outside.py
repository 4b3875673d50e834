"""golden/RF008/early_dropout fixed by hand: the dropout mask drawn outside the compiled model
and passed in (other random draws than F.dropout's, so outputs are not comparable).

Measured by measure.py next to it (issue 15)."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x, mask):
        return self.fc2(torch.relu(self.fc1(x)) * mask)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for step in range(10):
    model.drop.p = 0.3 - 0.03 * step
    keep = 1 - model.drop.p
    mask = torch.empty(8, 32).bernoulli_(keep).div_(keep) if model.drop.p > 0 else torch.ones(8, 32)
    loss = ((compiled(x, mask) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
