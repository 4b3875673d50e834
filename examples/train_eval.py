"""Train a step, then evaluate under `torch.no_grad()`, twice.

The first evaluation recompiles `forward`: grad mode is part of what a graph is compiled for
(`GLOBAL_STATE changed: grad_mode`). Each mode compiles once and is reused after that, so this
recompile should stay: `recompile-fix report` counts it as expected, not as one it missed.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


def main():
    torch.manual_seed(0)
    model = Regressor()
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    losses, predictions = [], []
    for _ in range(2):
        prediction = compiled(x)
        loss = F.mse_loss(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        with torch.no_grad():
            predictions.append(compiled(x))
    return {"losses": torch.stack(losses), "predictions": torch.stack(predictions)}


if __name__ == "__main__":
    main()
