"""Fine-tuning a tiny DistilBERT classifier (transformers): its forward defaults
config.problem_type on the first call with labels, so the compiled forward compiles twice."""

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
for step in range(3):
    input_ids = torch.randint(1, config.vocab_size, (4, 12))
    labels = torch.randint(0, config.num_labels, (4,))
    out = compiled(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(out.loss.detach())
print([round(loss.item(), 4) for loss in losses])
