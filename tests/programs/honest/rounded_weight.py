"""Two 0-d losses mixed by a weight that changes: a 0-d tensor weight (RF002's unproven wrap: the
source does not say what the losses are) computes `1 - alpha` in float32, not as a Python float,
and the last mix differs in the last bit."""

import torch

torch.manual_seed(0)


@torch.compile(backend="eager")
def mix(loss_a, loss_b, alpha):
    return alpha * loss_a + (1 - alpha) * loss_b


mixed = []
for alpha in (0.9, 0.8, 0.7, 0.6):
    loss_a, loss_b = torch.rand(()), torch.rand(())
    mixed.append(mix(loss_a, loss_b, alpha))
