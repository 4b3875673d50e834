# KL annealing: the training loop raises the KL term's weight each epoch. Both loss terms are
# 0-d float32 tensors, so a float64 weight would make the loss float64.
import torch
import torch.nn as nn
import torch.nn.functional as F


class VAE(nn.Module):
    def __init__(self, d=12, z=4):
        super().__init__()
        self.enc = nn.Linear(d, 2 * z)
        self.dec = nn.Linear(z, d)
        self.kl_weight = 0.0

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        recon = F.mse_loss(self.dec(z), x)
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1).mean()
        return recon + self.kl_weight * kl


torch.manual_seed(0)
model = VAE()
compiled = torch.compile(model, backend="eager")
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
data = torch.randn(64, 12)
losses = []
for epoch in range(3):
    model.kl_weight = min(1.0, epoch / 2)
    for i in range(0, 64, 16):
        loss = compiled(data[i : i + 16])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    print(f"epoch {epoch} beta {model.kl_weight:.2f} loss {loss.item():.4f}")
