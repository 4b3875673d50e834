import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


@torch.compile(backend="eager")
def mixup_loss(pred, y_a, y_b, lam):
    return lam * F.cross_entropy(pred, y_a) + (1 - lam) * F.cross_entropy(pred, y_b)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


model = torch.compile(Classifier(), backend="eager")
data, labels = torch.randn(50, 8), torch.randint(0, 4, (50,))
losses = []
for start in range(0, len(data), 16):  # a ragged last batch: 16, 16, 16, 2
    x, y = data[start : start + 16], labels[start : start + 16]
    y_b = y[torch.randperm(len(y))]
    # The model's call is an argument of the loss's: its input is marked before it runs.
    loss = mixup_loss(model(x), y, y_b, 0.7)
    losses.append(loss)
