"""A compiled training step whose optimizer's learning rate a scheduler changes.

Adam is built with a Python float lr; `ExponentialLR` multiplies it by 0.9 after each step
(outside the compiled function). Dynamo inlines `Adam.step` as its own frame and guards on
`self.param_groups[0]['lr'] == <value>`; with `dynamic=False` every new lr recompiles it.
"""

import torch
from torch import nn
from torch.optim.lr_scheduler import ExponentialLR

NUM_STEPS = 5


def main():
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = ExponentialLR(optimizer, gamma=0.9)
    inp = torch.randn(16, 8)

    @torch.compile(dynamic=False)
    def train_step(inp):
        optimizer.zero_grad()
        loss = model(inp).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    losses = []
    for _ in range(NUM_STEPS):
        losses.append(train_step(inp))
        scheduler.step()
    return {"losses": torch.stack(losses), "weight": model.weight.detach().clone()}


if __name__ == "__main__":
    main()
