"""Four dropouts under one schedule: every step sets p on each nn.Dropout of the model, and
torch names only the first dropout's guard at each recompile (the other three fail too)."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.drop1 = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 32)
        self.drop2 = nn.Dropout(0.3)
        self.fc3 = nn.Linear(32, 32)
        self.drop3 = nn.Dropout(0.3)
        self.fc4 = nn.Linear(32, 4)
        self.drop4 = nn.Dropout(0.3)

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
