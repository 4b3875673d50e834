"""A nanoGPT-shaped model trained a few steps: the blocks live in `self.transformer.h`, a
ModuleList inside a ModuleDict, and the whole model is compiled."""

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=32, width=16, layers=6):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, width),
                h=nn.ModuleList([Block(width) for _ in range(layers)]),
                ln_f=nn.LayerNorm(width),
            )
        )
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


torch.manual_seed(0)
model = GPT()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model = torch.compile(model)
losses = []
for step in range(3):
    idx = torch.randint(0, 32, (2, 8))
    loss = model(idx, torch.roll(idx, -1, dims=1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
weights = [p.detach().clone() for p in model.parameters()]
