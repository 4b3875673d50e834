"""The user compiles the scheduler's step itself: running it eagerly would undo what they asked
for, so the rule leaves it alone (its recompiles stay unfixed)."""

import torch
from diffusers import DDIMScheduler
from torch import nn

torch.manual_seed(0)
denoiser = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.SiLU(), nn.Conv2d(16, 3, 3, padding=1)).eval()
scheduler = DDIMScheduler(num_train_timesteps=1000)
scheduler.set_timesteps(3)
step = torch.compile(scheduler.step, backend="eager")

latents = torch.randn(1, 3, 8, 8)
with torch.no_grad():
    for t in scheduler.timesteps:
        latents = step(denoiser(latents), t, latents).prev_sample
