"""A new user's trial: a focal loss whose `gamma` (a float module attribute) is annealed per epoch.
As a 0-d tensor, `(1 - p) ** gamma` returns the same losses bit for bit on the calls compared, but
its backward rounds differently, and the trained weights differ in the last bits."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class FocalHead(nn.Module):
    def __init__(self, gamma=0.5):
        super().__init__()
        self.fc = nn.Linear(16, 4)
        self.gamma = gamma

    def forward(self, x, y):
        logp = F.log_softmax(self.fc(x), -1).gather(1, y[:, None]).squeeze(1)
        return (-((1 - logp.exp()) ** self.gamma) * logp).mean()


head = FocalHead()
opt = torch.optim.SGD(head.parameters(), lr=0.1)
compiled = torch.compile(head)
for epoch in range(4):
    head.gamma = 0.5 + 0.5 * epoch
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    loss = compiled(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss={loss.item():.6f}")
