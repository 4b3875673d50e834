"""Fine-tuning a tiny BERT classifier where the step is compiled, not the model: the compiled
function takes the model, and transformers' forward defaults `config.problem_type` on its first
call with labels. The padded length changes too, so torch names the size guard of the recompile,
not the `problem_type is None` guard that fails with it."""

import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(
    vocab_size=96,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=32,
    num_labels=3,
)
model = BertForSequenceClassification(config)
model.config.problem_type = "single_label_classification"
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile(backend="eager")
def compute_loss(model, batch):
    return model(**batch).loss


losses = []
for length in (10, 14, 12, 9):
    input_ids = torch.randint(1, config.vocab_size, (4, length))
    batch = {"input_ids": input_ids, "labels": torch.randint(0, config.num_labels, (4,))}
    torch._dynamo.maybe_mark_dynamic(batch["input_ids"], 1)
    loss = compute_loss(model, batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.detach())
print([round(loss.item(), 4) for loss in losses])
