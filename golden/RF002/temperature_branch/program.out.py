"""Negative: a temperature that decides a Python branch cannot become a tensor."""

import torch


@torch.compile
def sample(logits, temperature):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return torch.softmax(logits / temperature, dim=-1)


torch.manual_seed(0)
logits = torch.randn(2, 5)
for temperature in (0.0, 0.5, 1.0, 1.5):
    sample(logits, temperature)
