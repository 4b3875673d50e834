"""golden/RF008/early_dropout fixed by hand: F.dropout fed p as a 0-d float64 tensor buffer the
schedule fills (torch takes no tensor p in the graph: it breaks there).

Measured by measure.py next to it (issue 15)."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 4)
        self.register_buffer('p_t', torch.tensor(0.3, dtype=torch.float64), persistent=False)

    def forward(self, x):
        return self.fc2(torch.nn.functional.dropout(torch.relu(self.fc1(x)), self.p_t, self.training))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for step in range(10):
    model.drop.p = 0.3 - 0.03 * step
    model.p_t.fill_(model.drop.p)
    loss = ((compiled(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
