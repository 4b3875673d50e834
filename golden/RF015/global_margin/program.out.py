"""A triplet loss whose margin is a module-level float the training loop raises every epoch, read
by the compiled loss function: torch specialises the float on its first value, compiles again
when it changes, and only then traces it as a float input. A 0-d tensor is a graph input: one
compile serves every margin."""

import torch
import torch.nn.functional as F

MARGIN = torch.tensor(0.2)


@torch.compile(backend="eager")
def triplet_loss(anchor, positive, negative):
    closer = (anchor - positive).pow(2).sum(-1)
    farther = (anchor - negative).pow(2).sum(-1)
    return F.relu(closer - farther + MARGIN).mean()


torch.manual_seed(0)
embed = torch.nn.Linear(16, 8)
optimizer = torch.optim.SGD(embed.parameters(), lr=0.1)
data = torch.randn(3, 32, 16)
for epoch in range(4):
    MARGIN = torch.tensor(0.2 + 0.1 * epoch)
    loss = triplet_loss(embed(data[0]), embed(data[1]), embed(data[2]))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
