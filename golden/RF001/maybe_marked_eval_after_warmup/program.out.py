"""An evaluation loop that marks the batch dimension with `maybe_mark_dynamic`, as the PyTorch
docs suggest for a ragged last batch, after a latency probe at start-up that runs the first
batch unmarked. Torch guards whether a tensor was marked at all: the loop's first batch, the
very size the probe compiled for, compiles again."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, 10)

    def forward(self, images):
        return self.head(self.features(images).flatten(1))


def main():
    torch.manual_seed(0)
    model = Net().eval()
    compiled = torch.compile(model, backend="eager")
    batches = [torch.randn(n, 3, 16, 16) for n in (8, 8, 8, 5)]
    outputs = []
    with torch.no_grad():
        images_1 = batches[0]
        torch._dynamo.maybe_mark_dynamic(images_1, 0)
        compiled(images_1)  # latency probe
        for images in batches:
            torch._dynamo.maybe_mark_dynamic(images, 0)
            outputs.append(compiled(images))
    return {"outputs": torch.cat(outputs)}


if __name__ == "__main__":
    main()
