"""A causal-LM loss written as transformers writes it: the token count the loss is divided by
(`num_items_in_batch`, counted by the trainer over the accumulated batches) is tested for a
tensor only to move it to the loss's device. A Python int that changes every step recompiles
the compiled forward each time with dynamic=False."""

import torch
from torch import nn


def fixed_cross_entropy(source, target, num_items_in_batch=None, ignore_index=-100):
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = nn.functional.cross_entropy(source, target, ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        # just in case users pass an int for num_items_in_batch
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


class TinyLM(nn.Module):
    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids, labels, num_items_in_batch):
        logits = self.head(self.embed(input_ids))
        loss = fixed_cross_entropy(logits.flatten(0, 1), labels.flatten(), num_items_in_batch)
        return logits, loss


torch.manual_seed(0)
model = TinyLM()
compiled = torch.compile(model, dynamic=False)
input_ids = torch.randint(0, 32, (2, 8))
for step in range(4):
    labels = input_ids.clone()
    labels[:, : step + 1] = -100  # a growing prompt is masked out of the loss
    num_items_in_batch = int((labels != -100).sum())
    compiled(input_ids, labels, None if num_items_in_batch is None else torch.tensor(num_items_in_batch))
