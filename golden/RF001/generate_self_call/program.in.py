import torch
from torch import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=32, dim=16, block_size=64):
        super().__init__()
        self.block_size = block_size
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block_size, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        t = idx.size(1)
        h = self.tok(idx) + self.pos(torch.arange(t))
        h = h + torch.tanh(self.mix(h)).cumsum(dim=1) / t
        return self.head(h)

    @torch.no_grad()
    def generate(self, idx, steps):
        for _ in range(steps):
            idx_cond = idx[:, -self.block_size:]
            logits = self(idx_cond)
            next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            idx = torch.cat([idx, next_token], dim=1)
        return idx


torch.manual_seed(0)
model = TinyGPT()
model.compile()
prompt = torch.tensor([[1, 2, 3]])
print(model.generate(prompt, steps=6).tolist())
