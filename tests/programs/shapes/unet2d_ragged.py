"""A diffusers UNet2DModel (tiny config, random weights) run over images in batches of 4, the last
one ragged, called as pipelines call it: `model(sample, timesteps).sample`."""

import torch
from diffusers import UNet2DModel

torch.manual_seed(0)
model = UNet2DModel(
    sample_size=16,
    in_channels=3,
    out_channels=3,
    layers_per_block=2,
    block_out_channels=(8, 16),
    norm_num_groups=4,
    down_block_types=("DownBlock2D", "AttnDownBlock2D"),
    up_block_types=("AttnUpBlock2D", "UpBlock2D"),
).eval()
compiled = torch.compile(model, backend="eager")
images = torch.randn(10, 3, 16, 16)
outputs = []
with torch.no_grad():
    for start in range(0, len(images), 4):  # a ragged last batch: 4, 4, 2
        batch = images[start : start + 4]
        timesteps = torch.full((batch.shape[0],), 10, dtype=torch.long)
        outputs.append(compiled(batch, timesteps).sample)
