"""A hand-written decode loop: the model runs eagerly and the sampling step is compiled. The last
position's logits, `logits[:, -1, :]`, are a view whose batch stride grows with the sequence."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, WIDTH = 64, 32


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.mix = nn.GRU(WIDTH, WIDTH, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        hidden, _ = self.mix(self.embed(ids))
        return self.head(hidden)


@torch.compile(backend="eager")
def pick_next(logits, temperature=0.7):
    probs = F.softmax(logits / temperature, dim=-1)
    return probs.argmax(dim=-1, keepdim=True)


model = TinyLM().eval()
ids = torch.randint(0, VOCAB, (2, 4))
with torch.no_grad():
    for _ in range(8):
        logits = model(ids)
        next_id = pick_next(logits[:, -1, :].contiguous())
        ids = torch.cat([ids, next_id], dim=1)
print(ids.tolist())
