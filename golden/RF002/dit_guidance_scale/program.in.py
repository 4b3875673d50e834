"""A DiT sampling loop with classifier-free guidance in a compiled denoising step, as diffusers'
DiTPipeline does it: the transformer's output is a BaseOutput whose `.sample` holds the noise
prediction, and the guidance scale is swept per image (a float that changes between calls)."""

import torch
from diffusers import DiTTransformer2DModel


@torch.compile(dynamic=False)
def guided_noise(transformer, latents, t, class_labels, guidance_scale):
    latent_in = torch.cat([latents] * 2)
    noise_pred = transformer(latent_in, timestep=t, class_labels=class_labels).sample
    eps, _ = noise_pred.chunk(2, dim=1)  # learned sigma: the first half of the channels is the noise
    cond, uncond = eps.chunk(2)
    return uncond + guidance_scale * (cond - uncond)


torch.manual_seed(0)
transformer = DiTTransformer2DModel(
    num_attention_heads=2,
    attention_head_dim=8,
    in_channels=4,
    out_channels=8,
    num_layers=2,
    sample_size=8,
    patch_size=2,
    norm_num_groups=4,
).eval()
latents = torch.randn(1, 4, 8, 8)
class_labels = torch.tensor([3, 1000])  # the class, and the null class of classifier-free guidance
with torch.no_grad():
    for guidance_scale in (1.5, 3.0, 4.0, 7.5):
        x = latents
        for t in (torch.tensor([999, 999]), torch.tensor([500, 500])):
            x = x - 0.1 * guided_noise(transformer, x, t, class_labels, guidance_scale)
