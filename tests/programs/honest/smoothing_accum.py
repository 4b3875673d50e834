"""A new user's trial: label smoothing annealed per epoch and a gradient-accumulation divisor that
changes (the last group is shorter). RF002 wraps the divisor (4 -> 3 compiles); RF005's graph break
before `cross_entropy` splits the frame, whose resumed half then recompiles for the divisor
again: together they compile 4 times, as before."""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 5))
    def forward(self, x):
        return self.net(x)

model = MLP()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

@torch.compile
def compute_loss(model, x, y, smoothing, accum_steps):
    logits = model(x)
    loss = F.cross_entropy(logits, y, label_smoothing=smoothing)
    return loss / accum_steps

X = torch.randn(70, 20); Y = torch.randint(0, 5, (70,))
micro = [(X[i:i + 10], Y[i:i + 10]) for i in range(0, 70, 10)]
ACCUM = 3
total = 0.0
for epoch in range(3):
    smoothing = 0.2 * (1 - epoch / 3)
    for g in range(0, len(micro), ACCUM):
        group = micro[g:g + ACCUM]
        for x, y in group:
            loss = compute_loss(model, x, y, smoothing, len(group))
            loss.backward()
            total += loss.item()
        opt.step(); opt.zero_grad()
print("CHECKSUM", sum(p.double().sum().item() for p in model.parameters()), total)
