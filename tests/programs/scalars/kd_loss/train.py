"""Distillation with a temperature `T` and a mixing weight `alpha` annealed per epoch, both Python
floats into one compiled loss: `T`'s wrap is bit-identical, `alpha`'s may round, and with `T`'s
alone every compile stays (each compile has its own `alpha`)."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
teacher, student = nn.Linear(16, 10), nn.Linear(16, 10)
optimizer = torch.optim.SGD(student.parameters(), lr=0.05)


@torch.compile(backend="eager")
def kd_loss(s_logits, t_logits, labels, T, alpha):
    soft = F.kl_div(F.log_softmax(s_logits / T, -1), F.softmax(t_logits / T, -1), reduction="batchmean") * T * T
    hard = F.cross_entropy(s_logits, labels)
    return alpha * soft + (1 - alpha) * hard


losses = []
for epoch in range(3):
    T = 4.0 * (0.7**epoch)
    alpha = 0.9 - 0.1 * epoch
    for _ in range(2):
        x, y = torch.randn(8, 16), torch.randint(0, 10, (8,))
        with torch.no_grad():
            t = teacher(x)
        loss = kd_loss(student(x), t, y, T, alpha)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
