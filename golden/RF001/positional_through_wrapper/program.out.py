"""Classifying pad-to-longest batches with a model whose forward goes through a
`(*args, **kwargs)` decorator (as transformers' `deprecate_kwarg` does: `self` is
`args[0]`), called positionally; the last batch is short."""

import functools

import torch
from torch import nn


def renamed_kwarg(old, new):
    def decorator(forward):
        @functools.wraps(forward)
        def wrapped_func(*args, **kwargs):
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return forward(*args, **kwargs)

        return wrapped_func

    return decorator


class Classifier(nn.Module):
    def __init__(self, vocab=16, dim=8, classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, classes)

    @renamed_kwarg("mask", "attention_mask")
    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids) * attention_mask[..., None]
        return self.out(h.sum(dim=1) / attention_mask.sum(dim=1, keepdim=True))


def pad(seqs):
    longest = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), longest, dtype=torch.long)
    mask = torch.zeros(len(seqs), longest)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return ids, mask


torch.manual_seed(0)
model = torch.compile(Classifier().eval())
texts = [torch.randint(1, 16, (n,)) for n in (4, 6, 3, 8, 5, 7, 2)]
with torch.no_grad():
    for start in range(0, len(texts), 3):
        ids, mask = pad(texts[start : start + 3])
        torch._dynamo.maybe_mark_dynamic(ids, [0, 1])
        torch._dynamo.maybe_mark_dynamic(mask, [0, 1])
        print(model(ids, mask).argmax(-1).tolist())
