"""Fine-tuning a tiny GPT-NeoX: pad-to-longest batches, a ragged last batch, model(**batch)."""

import torch
from torch.utils.data import DataLoader
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

torch.manual_seed(0)
config = GPTNeoXConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
)
model = GPTNeoXForCausalLM(config)
model.train()
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

PAD = 0
lengths = [7, 12, 5, 9, 16, 11, 6, 14, 8, 10, 13, 9]
examples = [torch.randint(1, config.vocab_size, (n,)) for n in lengths]


def collate(samples):
    longest = max(len(s) for s in samples)
    input_ids = torch.full((len(samples), longest), PAD)
    attention_mask = torch.zeros((len(samples), longest), dtype=torch.long)
    for i, s in enumerate(samples):
        input_ids[i, : len(s)] = s
        attention_mask[i, : len(s)] = 1
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


loader = DataLoader(examples, batch_size=5, shuffle=False, collate_fn=collate)

losses = []
for epoch in range(2):
    for batch in loader:
        out = compiled(**batch)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.loss.detach())

results = {"losses": torch.stack(losses), "params": [p.detach().clone() for p in model.parameters()]}
print([round(x, 4) for x in results["losses"].tolist()])
