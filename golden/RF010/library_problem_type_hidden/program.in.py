"""Fine-tuning a tiny DistilBERT classifier on pad-to-longest batches: the padded length changes,
so torch names the size guard of the recompile, not the `config.problem_type is None` guard that
fails with it (transformers' forward defaults problem_type on the first call with labels)."""

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification

torch.manual_seed(0)
config = DistilBertConfig(
    vocab_size=96, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=32, num_labels=3
)
model = DistilBertForSequenceClassification(config)
model.train()
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

losses = []
for length in (10, 14, 12, 9):
    input_ids = torch.randint(1, config.vocab_size, (4, length))
    labels = torch.randint(0, config.num_labels, (4,))
    out = compiled(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(out.loss.detach())
print([round(loss.item(), 4) for loss in losses])
