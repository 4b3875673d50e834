"""A compiled training step whose loss module counts its calls in a Python int (the pattern of a
beta-VAE loss whose KL capacity grows with the step): every step recompiles until the limit."""

import torch
import torch.nn.functional as F
from torch import nn


class AnnealedKLLoss(nn.Module):
    num_iter = 0

    def __init__(self, max_capacity=25.0, capacity_steps=100, gamma=4.0):
        super().__init__()
        self.gamma = gamma
        self.C_max = torch.tensor([max_capacity])
        self.C_stop_iter = capacity_steps

    def forward(self, recons, target, mu, log_var):
        self.num_iter += 1
        recons_loss = F.mse_loss(recons, target)
        kld = torch.mean(-0.5 * torch.sum(1 + log_var - mu**2 - log_var.exp(), dim=1))
        capacity = torch.clamp(self.C_max / self.C_stop_iter * self.num_iter, 0, 25.0)
        return recons_loss + self.gamma * (kld - capacity).abs().sum()


class TinyVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 4)
        self.decoder = nn.Linear(2, 8)

    def forward(self, x):
        mu, log_var = self.encoder(x).chunk(2, dim=-1)
        return self.decoder(mu), mu, log_var


torch.manual_seed(0)
model = TinyVAE()
criterion = AnnealedKLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


@torch.compile
def training_loss(x):
    recons, mu, log_var = model(x)
    return criterion(recons, x, mu, log_var)


data = torch.randn(20, 16, 8)
for step in range(20):
    loss = training_loss(data[step])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
