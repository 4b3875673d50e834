import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def train_epoch(model, optimizer, data, targets, batch_size=32):
    losses = []
    for start in range(0, len(data), batch_size):
        inputs = data[start:start + batch_size]
        labels = targets[start:start + batch_size]
        optimizer.zero_grad()
        torch._dynamo.mark_dynamic(inputs, 0)
        output = model(inputs)
        loss = nn.functional.cross_entropy(output, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


torch.manual_seed(0)
net = Net()
model = torch.compile(net)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
data = torch.randn(113, 8)
targets = torch.randint(0, 2, (113,))
train_epoch(model, optimizer, data, targets)
