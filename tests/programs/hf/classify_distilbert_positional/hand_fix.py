"""Evaluating a tiny DistilBERT classifier (compiled in place with model.compile()),
called positionally, on pad-to-longest batches with a short last batch."""

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification

torch.manual_seed(0)
config = DistilBertConfig(
    vocab_size=128,
    dim=32,
    n_layers=2,
    n_heads=4,
    hidden_dim=64,
    max_position_embeddings=64,
    num_labels=2,
)
model = DistilBertForSequenceClassification(config).eval()
model.compile(backend="eager")

lengths = [9, 4, 12, 7, 15, 6, 10, 3, 11, 5]
texts = [torch.randint(1, config.vocab_size, (n,)) for n in lengths]


def pad_batch(seqs):
    longest = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), longest), dtype=torch.long)
    mask = torch.zeros((len(seqs), longest), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return ids, mask


all_logits = []
with torch.no_grad():
    for start in range(0, len(texts), 4):
        ids, mask = pad_batch(texts[start : start + 4])
        torch._dynamo.mark_dynamic(ids, [0, 1])
        torch._dynamo.mark_dynamic(mask, [0, 1])
        logits = model(ids, mask)[0]
        all_logits.append(logits)

results = {"logits": all_logits}
print([l.argmax(-1).tolist() for l in all_logits])
