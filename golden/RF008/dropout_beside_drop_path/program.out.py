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

    @torch.compiler.disable
    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


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


class Block(nn.Module):
    def __init__(self, d, p, dp):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.drop = ScheduledDropout(p)
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
