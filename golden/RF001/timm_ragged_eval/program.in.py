"""Evaluate a timm ResNet the way its validate.py does, with a dataset whose last batch is short."""

import timm
import torch

torch.manual_seed(0)
model = timm.create_model("resnet18", pretrained=False, num_classes=10)
model.eval()
model = torch.compile(model)

images = torch.randn(10, 3, 32, 32)
labels = torch.randint(0, 10, (10,))
batch_size = 4
correct = 0
with torch.no_grad():
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size]
        output = model(batch)
        correct += (output.argmax(-1) == labels[start : start + batch_size]).sum().item()
print(f"top-1 {correct / len(images):.3f}")
