"""A timm ViT at several input resolutions (dynamic_img_size=True), as multi-scale inference runs it."""

import timm
import torch

torch.manual_seed(0)
model = timm.create_model(
    "vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=32, patch_size=8, dynamic_img_size=True
)
model.eval()
compiled = torch.compile(model)

with torch.no_grad():
    for size in (32, 48, 64, 40):
        out = compiled(torch.randn(2, 3, size, size))
        print(size, tuple(out.shape))
