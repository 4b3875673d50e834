"""A small language model trained under inductor (its own backend) on a DataLoader-like loop
whose last batch is ragged (44 rows in batches of 16). inductor's CPU backward of the two
embeddings accumulates with atomic adds, so two runs of this unchanged program differ (1e-9 to
6e-8 in the weights): a fix's bits can only be compared with torch's deterministic algorithms."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(32, 16)
        self.wpe = nn.Embedding(8, 16)
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 32, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1))
        logits = self.head(self.ln(self.wte(idx) + self.wpe(pos)))
        return F.cross_entropy(logits.reshape(-1, 32), targets.reshape(-1))


model = TinyLM()
model.compile()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = torch.randint(0, 32, (44, 9))
for start in range(0, 44, 16):
    x, y = data[start : start + 16, :-1], data[start : start + 16, 1:]
    loss = model(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
