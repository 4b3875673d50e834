"""A sampling loop whose compiled step calls a diffusers scheduler: DDIM's `step` breaks the
graph and reads the timestep as a number, so its frames compile again at every step."""

import torch
from diffusers import DDIMScheduler
from torch import nn

torch.manual_seed(0)
denoiser = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.SiLU(), nn.Conv2d(16, 3, 3, padding=1)).eval()
scheduler = DDIMScheduler(num_train_timesteps=1000)
scheduler.set_timesteps(4)


@torch.compile(backend="eager")
def denoise_step(latents, t):
    noise_pred = denoiser(latents)
    return torch.compiler.disable(scheduler.step)(noise_pred, t, latents).prev_sample


latents = torch.randn(1, 3, 8, 8)
with torch.no_grad():
    for t in scheduler.timesteps:
        latents = denoise_step(latents, t)
