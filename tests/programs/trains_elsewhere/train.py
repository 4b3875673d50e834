"""Trains the model of model.py on batches of 8, 8 and 4 rows (a ragged last batch)."""

import torch

from model import Model

torch.manual_seed(0)
model = Model()
model.compile()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(20, 8)
for start in range(0, 20, 8):
    batch = data[start:start + 8]
    loss = model(batch).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.6f}")
