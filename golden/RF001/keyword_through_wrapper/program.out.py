"""Greedy decoding with a model whose forward goes through a `(self, *args, **kwargs)`
decorator (as transformers' `can_return_tuple` does), called with keyword arguments,
compiled with dynamic=False: the ids and their mask grow together."""

import functools

import torch
from torch import nn


def returns_tuple(forward):
    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        return (forward(self, *args, **kwargs),)

    return wrapper


class TinyLM(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    @returns_tuple
    def forward(self, input_ids=None, attention_mask=None):
        h = self.embed(input_ids) * attention_mask[..., None]
        h = h.cumsum(dim=1) / attention_mask.cumsum(dim=1)[..., None]
        return self.head(h)


torch.manual_seed(0)
model = TinyLM().eval()
compiled = torch.compile(model, dynamic=False)

ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
mask = torch.ones_like(ids)
with torch.no_grad():
    for _ in range(5):
        torch._dynamo.maybe_mark_dynamic(ids, 1)
        torch._dynamo.maybe_mark_dynamic(mask, 1)
        logits = compiled(input_ids=ids, attention_mask=mask)[0]
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
        mask = torch.cat([mask, torch.ones_like(next_id)], dim=1)
print(ids.tolist())
