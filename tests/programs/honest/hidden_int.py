"""Beam search whose batch is the number of beams: the sizes change with `num_beams`, and so does
`num_beams` itself (an int passed to `topk`). torch names the size guard first; marking the sizes
dynamic only uncovers the int's guard: 2 compiles either way."""

import torch
from torch import nn

torch.manual_seed(0)
V, D = 20, 16
emb, rnn, proj = nn.Embedding(V, D), nn.GRUCell(D, D), nn.Linear(D, V)


@torch.compile(backend="eager")
def step(tokens, h, scores, num_beams):
    h = rnn(emb(tokens), h)
    cand = (scores.unsqueeze(-1) + torch.log_softmax(proj(h), -1)).view(-1)
    top, idx = cand.topk(num_beams)
    return idx % V, h[idx // V], top


with torch.no_grad():
    for num_beams in [2, 3, 4]:
        tokens = torch.zeros(num_beams, dtype=torch.long)
        h = torch.zeros(num_beams, D)
        scores = torch.full((num_beams,), -1e9)
        scores[0] = 0.0
        for t in range(4):
            tokens, h, scores = step(tokens, h, scores, num_beams)
        print(num_beams, tokens.tolist(), round(scores[0].item(), 4))
