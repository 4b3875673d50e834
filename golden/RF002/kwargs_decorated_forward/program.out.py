"""A transformers-style forward behind a decorator that takes *args, **kwargs (functools.wraps):
the trainer passes `num_items_in_batch` as a keyword, a Python int that changes each step."""

import functools

import torch
from torch import nn


def keyword_checked(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    @keyword_checked
    def forward(self, x, labels=None, num_items_in_batch=None):
        out = self.fc(x)
        loss = ((out - labels) ** 2).sum() / num_items_in_batch
        return out, loss


torch.manual_seed(0)
model = Regressor()
compiled = torch.compile(model, dynamic=False)
x = torch.randn(6, 8)
labels = torch.randn(6, 4)
for step in range(4):
    num_items_in_batch = 20 + step
    compiled(x, labels=labels, num_items_in_batch=torch.tensor(num_items_in_batch))
