# Euler sampling with linspace spacing gives fractional timesteps, passed to a compiled
# UNet2DModel as Python floats: diffusers makes a long tensor of a number (truncating it), and
# takes a tensor as it is. An int64 0-d tensor takes the tensor's path with the number's value.
import torch
from diffusers import EulerDiscreteScheduler, UNet2DModel

torch.manual_seed(0)
unet = UNet2DModel(
    sample_size=8,
    in_channels=4,
    out_channels=4,
    layers_per_block=1,
    block_out_channels=(8, 16),
    down_block_types=("DownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "UpBlock2D"),
    norm_num_groups=4,
).eval()
scheduler = EulerDiscreteScheduler(num_train_timesteps=1000, timestep_spacing="linspace")
unet = torch.compile(unet, backend="eager")


@torch.no_grad()
def sample(steps, seed):
    generator = torch.Generator().manual_seed(seed)
    scheduler.set_timesteps(steps)
    latents = torch.randn(1, 4, 8, 8, generator=generator) * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        noise = unet(scheduler.scale_model_input(latents, t), torch.tensor(t.item(), dtype=torch.int64)).sample
        latents = scheduler.step(noise, t, latents).prev_sample
    return latents


images = [sample(2, 0), sample(3, 1)]
