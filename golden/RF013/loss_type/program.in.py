"""Fine-tune a tiny GPT-2 (random weights) on batches padded to the longest sequence in each,
compiled whole, the labels passed as people pass them: `model(input_ids=..., labels=...)`."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64)
model = GPT2LMHeadModel(config)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
compiled = torch.compile(model, backend="eager")

losses = []
for step, length in enumerate([12, 16, 20, 9]):
    input_ids = torch.randint(0, 128, (4, length))
    labels = input_ids.clone()
    out = compiled(input_ids=input_ids, labels=labels)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(out.loss.detach())
