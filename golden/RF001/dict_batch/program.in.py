"""Training on pad-to-longest batches that a collate function builds as a dict, called as
`model(**batch)`; the last batch is short."""

import torch
from torch import nn
from torch.utils.data import DataLoader


class Tagger(nn.Module):
    def __init__(self, vocab=16, dim=8, tags=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, tags)

    def forward(self, input_ids, attention_mask, labels):
        logits = self.out(self.embed(input_ids))
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction="none")
        return (loss * attention_mask.flatten()).sum() / attention_mask.sum()


def collate(samples):
    longest = max(len(s) for s in samples)
    input_ids = torch.zeros(len(samples), longest, dtype=torch.long)
    attention_mask = torch.zeros(len(samples), longest)
    for i, s in enumerate(samples):
        input_ids[i, : len(s)] = s
        attention_mask[i, : len(s)] = 1
    labels = input_ids % 3
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


torch.manual_seed(0)
model = Tagger()
compiled = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
examples = [torch.randint(1, 16, (n,)) for n in (5, 7, 4, 9, 6, 3, 8, 5)]
loader = DataLoader(examples, batch_size=3, collate_fn=collate)

for batch in loader:
    loss = compiled(**batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(round(loss.item(), 4))
