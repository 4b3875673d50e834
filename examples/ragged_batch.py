"""A training epoch whose last batch is smaller than the others.

113 rows in batches of 32 give 32, 32, 32, 17. The compiled model specialises on batch size 32
at its first call, so the ragged last batch recompiles `forward` with a size mismatch at dim 0.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_ROWS = 113
BATCH_SIZE = 32
NUM_FEATURES = 8
NUM_CLASSES = 3


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(NUM_FEATURES, 16)
        self.out = nn.Linear(16, NUM_CLASSES)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


def make_loader() -> DataLoader:
    inputs = torch.randn(NUM_ROWS, NUM_FEATURES)
    targets = torch.randint(0, NUM_CLASSES, (NUM_ROWS,))
    return DataLoader(TensorDataset(inputs, targets), batch_size=BATCH_SIZE, shuffle=False,
                      drop_last=False)


def train_epoch(model, loader, optimizer):
    """One pass over `loader`; returns the per-batch losses."""
    model.train()
    losses = []
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def main():
    torch.manual_seed(0)
    loader = make_loader()
    model = Classifier()
    compiled_model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = train_epoch(compiled_model, loader, optimizer)
    return {"losses": losses, "hidden_weight": model.hidden.weight.detach().clone()}


if __name__ == "__main__":
    main()
