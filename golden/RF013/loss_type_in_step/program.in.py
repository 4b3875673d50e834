"""A tiny GPT-2 (random weights) trained with a sequence-length curriculum; the loss step is
compiled, not the model: transformers' loss warning breaks the graph of each model frame torch
compiles from inside `compute_loss`, and the crop length is an int the step slices with."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64)
model = GPT2LMHeadModel(config)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.compile(backend="eager")
def compute_loss(model, input_ids, seq_len):
    ids = input_ids[:, :seq_len]
    return model(input_ids=ids, labels=ids).loss


data = torch.randint(0, 128, (16, 32))
losses = []
for step, seq_len in enumerate([8, 8, 16, 16, 24, 32]):
    loss = compute_loss(model, data[(step * 4) % 16 : (step * 4) % 16 + 4], seq_len)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.detach())
