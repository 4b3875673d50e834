"""Progressive growing: a generator and a critic gain a stage, and a fade-in `alpha` blends the new
stage's output with the upsampled old one; both are compiled, and the loop sets alpha on both."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.stem = nn.Linear(4, ch * 16)
        self.grow = nn.Conv2d(ch, ch, 3, padding=1)
        self.to_rgb_old = nn.Conv2d(ch, 3, 1)
        self.to_rgb_new = nn.Conv2d(ch, 3, 1)
        self.alpha = 1.0

    def forward(self, z):
        x = self.stem(z).view(z.shape[0], -1, 4, 4)
        up = F.interpolate(x, scale_factor=2.0)
        new = self.to_rgb_new(F.leaky_relu(self.grow(up), 0.2))
        return self.alpha * new + (1 - self.alpha) * self.to_rgb_old(up)


class Critic(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.from_rgb = nn.Conv2d(3, ch, 1)
        self.head = nn.Linear(ch * 64, 1)
        self.alpha = 1.0

    def forward(self, img):
        x = F.leaky_relu(self.from_rgb(img), 0.2)
        x = self.alpha * x + (1 - self.alpha) * x.detach()
        return self.head(x.flatten(1))


torch.manual_seed(0)
G, D = Generator(), Critic()
G_c, D_c = torch.compile(G, backend="eager"), torch.compile(D, backend="eager")
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)

fade_steps = 4
losses = []
for step in range(6):
    alpha = min(1.0, (step + 1) / fade_steps)
    G.alpha = D.alpha = alpha
    z = torch.randn(4, 4)
    d_loss = D_c(G_c(z).detach()).mean() - D_c(torch.randn(4, 3, 8, 8)).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = -D_c(G_c(z)).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    losses += [d_loss.detach(), g_loss.detach()]
