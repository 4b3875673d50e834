"""Fine-tuning a tiny DistilBERT classifier built inside the compile call, each batch moved to the
device in the call (`input_ids=input_ids.to(device)`), as many training scripts write it. The
padded length changes, and transformers' forward defaults `config.problem_type` on the first
call with labels (a guard torch does not name: it fails with the size guard)."""

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification

torch.manual_seed(0)
device = "cpu"
config = DistilBertConfig(
    vocab_size=96, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=32, num_labels=3
)
model = torch.compile(DistilBertForSequenceClassification(config).to(device), backend="eager")
model.config.problem_type = "single_label_classification"
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

losses = []
for length in (10, 14, 12, 9):
    input_ids = torch.randint(1, config.vocab_size, (4, length))
    mask = torch.ones_like(input_ids)
    labels = torch.randint(0, config.num_labels, (4,))
    input_ids_1 = input_ids.to(device)
    attention_mask_1 = mask.to(device)
    torch._dynamo.maybe_mark_dynamic(input_ids_1, 1)
    torch._dynamo.maybe_mark_dynamic(attention_mask_1, 1)
    out = model(input_ids=input_ids_1, attention_mask=attention_mask_1, labels=labels.to(device))
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(out.loss.detach())
print([round(loss.item(), 4) for loss in losses])
