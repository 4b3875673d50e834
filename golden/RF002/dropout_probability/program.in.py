"""Negative: a dropout probability is a Python-number setting of F.dropout, not a tensor value."""

import torch
import torch.nn.functional as F


@torch.compile(dynamic=False)
def regularize(x, p):
    return F.dropout(x, p, training=True)


torch.manual_seed(0)
x = torch.randn(4, 8)
for p in (0.1, 0.2, 0.3):
    regularize(x, p)
