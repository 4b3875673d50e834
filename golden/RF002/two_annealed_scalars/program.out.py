"""Two annealed scalars: the temperature (tau) and the KL weight (beta) both change every step.
Torch names only the first failing guard of each recompile (one of the two); the other changed in the
same compiles and is guarded on its value too: both must become tensors for one compile."""

import torch
import torch.nn.functional as F


@torch.compile(dynamic=False)
def vae_loss(logits, target, mu, logvar, tau, beta):
    recon = F.cross_entropy(logits / tau, target)
    kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    return recon + beta * kl


torch.manual_seed(0)
logits = torch.randn(8, 10)
target = torch.randint(0, 10, (8,))
mu, logvar = torch.randn(8, 4), torch.randn(8, 4)
for step in range(4):
    tau = 2.0 - 0.25 * step
    beta = min(1.0, 0.1 + 0.3 * step)
    loss = vae_loss(logits, target, mu, logvar, torch.tensor(tau, dtype=torch.float64), torch.tensor(beta))
