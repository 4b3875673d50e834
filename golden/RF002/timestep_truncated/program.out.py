"""Negative for safe fixes: a denoiser that truncates a Python-float timestep to a long tensor (as
diffusers' UNet2DModel does) takes another path for a tensor timestep, which the analysis does not
follow: `apply` leaves it alone, and the long 0-d tensor is a candidate only a run proves."""

import torch
from torch import nn


class TinyDenoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, sample, timestep):
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            timesteps = torch.tensor([timesteps], dtype=torch.long, device=sample.device)
        return self.proj(sample) + self.embed(timesteps)


torch.manual_seed(0)
denoiser = torch.compile(TinyDenoiser(), dynamic=False)
x = torch.randn(4, 8)
with torch.no_grad():
    for t in (1.0, 0.8333, 0.6667):
        denoiser(x, t * 999)
