"""A transformers causal LM trained with the loss normalised by the batch's token count, as
Trainer does under gradient accumulation: `num_items_in_batch`, a Python int that changes each
step, goes through the model's **kwargs into transformers' own loss function."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
model = LlamaForCausalLM(config)
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

losses = []
for n_items in [30, 31, 29, 32]:
    ids = torch.randint(0, config.vocab_size, (2, 16))
    out = compiled(input_ids=ids, labels=ids, num_items_in_batch=torch.tensor(n_items))
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(out.loss.detach())
