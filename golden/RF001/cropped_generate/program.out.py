"""nanoGPT-style sampling: `generate` feeds the model a prompt that grows by one token per step
from a single token, cropped to the last `block_size` tokens. Three causes of recompiles: the
length changes, the first call has length 1 (specialised even when marked dynamic), and once
the crop kicks in, `idx_cond` is a view whose stride changes with the length of `idx`. The fix
removes two (3 -> 2 compiles); the size-1 start stays specialised, since mark_unbacked is not
safe for a model that calls into torch (the finding says so)."""

import torch
from torch import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=16, width=8, block_size=4):
        super().__init__()
        self.block_size = block_size
        self.emb = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        return self.head(self.emb(idx))

    @torch.no_grad()
    def generate(self, idx, steps):
        for _ in range(steps):
            idx_cond = idx[:, -self.block_size:].clone(memory_format=torch.contiguous_format)
            torch._dynamo.mark_dynamic(idx_cond, 1)
            logits = self(idx_cond)
            idx = torch.cat([idx, logits[:, -1:].argmax(-1)], dim=1)
        return idx


torch.manual_seed(0)
model = TinyGPT()
model.compile()
print(model.generate(torch.tensor([[1]]), steps=7))
