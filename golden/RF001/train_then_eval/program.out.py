"""Fine-tune a tiny BERT classifier on batches of growing length, then evaluate at other lengths.
The training call recompiles for the length; the eval call compiled dynamic at once only because
of that (automatic dynamic), so marking the training call alone leaves the eval call compiling
static, then again for its next length: both calls get the mark."""

import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(
    vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
)
model = BertForSequenceClassification(config)
model.config.problem_type = "single_label_classification"
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

model.train()
for length in (8, 12, 16):
    input_ids = torch.randint(0, 100, (4, length))
    labels = torch.randint(0, 2, (4,))
    torch._dynamo.maybe_mark_dynamic(input_ids, 1)
    loss = compiled(input_ids=input_ids, labels=labels).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

model.eval()
outputs = []
with torch.no_grad():
    for length in (10, 14):
        input_ids = torch.randint(0, 100, (4, length))
        torch._dynamo.maybe_mark_dynamic(input_ids, 1)
        outputs.append(compiled(input_ids=input_ids).logits)
