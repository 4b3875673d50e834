"""AdamW under a cosine schedule, its step compiled, everything inside `main()` (a new user's
trial): the optimizer is gone when the program exits, and its weights must still be compared."""

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10, eta_min=1e-5)
    compiled_step = torch.compile(optimizer.step)
    data, target = torch.randn(128, 32), torch.randn(128, 4)
    for step in range(10):
        idx = torch.arange(step * 8, step * 8 + 32) % 128
        loss = nn.functional.mse_loss(model(data[idx]), target[idx])
        optimizer.zero_grad()
        loss.backward()
        compiled_step()
        scheduler.step()


if __name__ == "__main__":
    main()
