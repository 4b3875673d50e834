"""Sequence classification with a tiny RoBERTa, called with keyword arguments on
batches whose padded length changes."""

import torch
from transformers import RobertaConfig, RobertaForSequenceClassification

torch.manual_seed(0)
config = RobertaConfig(
    vocab_size=128,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    num_labels=3,
)
model = RobertaForSequenceClassification(config).eval()
model = torch.compile(model, backend="eager")


def make_batch(lengths):
    longest = max(lengths)
    input_ids = torch.full((len(lengths), longest), config.pad_token_id)
    attention_mask = torch.zeros((len(lengths), longest), dtype=torch.long)
    for i, n in enumerate(lengths):
        input_ids[i, :n] = torch.randint(3, config.vocab_size, (n,))
        attention_mask[i, :n] = 1
    return input_ids, attention_mask


predictions = []
with torch.no_grad():
    for lengths in ([8, 5, 7, 3], [12, 9, 4, 11], [20, 6, 13, 17], [9, 9, 2, 5], [15, 3, 8, 14]):
        input_ids, attention_mask = make_batch(lengths)
        torch._dynamo.mark_dynamic(input_ids, 1)
        torch._dynamo.mark_dynamic(attention_mask, 1)
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        predictions.append(logits)

results = {"logits": predictions}
print([p.argmax(-1).tolist() for p in predictions])
