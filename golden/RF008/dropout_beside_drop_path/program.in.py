# Early dropout (Liu et al. 2023): the dropout and drop-path rates are set on the modules every
# step, decaying to 0. torch names the drop path's guard with its first use; the dropout's `p`
# fails on the same calls but never gets a line of first use.
import torch
import torch.nn as nn
import torch.nn.functional as F


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    return x * random_tensor / keep_prob


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Block(nn.Module):
    def __init__(self, d, p, dp):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(2 * d, d)
        self.drop_path = DropPath(dp)

    def forward(self, x):
        return x + self.drop_path(self.fc2(self.drop(F.gelu(self.fc1(x)))))


def set_rates(model, rate):
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = rate
        if isinstance(module, DropPath):
            module.drop_prob = rate


torch.manual_seed(0)
model = Block(16, 0.1, 0.1)
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(4):
    set_rates(model, 0.1 - 0.02 * step)
    x = torch.randn(8, 16)
    loss = compiled(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.detach())
