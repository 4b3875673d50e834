"""nanoGPT-style: train a small GPT compiled with `model.compile()`, then sample from it.

Training reads a DataLoader of 44 sequences in batches of 16, so the last batch has 12 rows,
and calls `model(x, y)` (the loss is computed inside the compiled `forward`). Then `generate()`
starts from a one-token prompt and calls the same compiled `forward` with `idx_cond`, the last
`block_size` tokens of a sequence that grows by one token per step (`idx[:, -block_size:]`, a
view whose strides change with the length of `idx`), under `torch.no_grad()` in eval mode.

Each of these compiles `forward` again: the ragged last batch (dim 0 of `idx` and `targets`),
the switch to eval mode without gradients and without targets (legitimate: a different
program), the one-token prompt (sizes 0 and 1 are specialised), the growing sequence (dim 1),
and the crop (strides). See examples/README.md for the counts before and after a fix.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB_SIZE = 32
BLOCK_SIZE = 8
EMBED_DIM = 16
NUM_HEADS = 2
NUM_LAYERS = 4
NUM_SEQUENCES = 44
BATCH_SIZE = 16
NEW_TOKENS = 12


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(EMBED_DIM, 3 * EMBED_DIM)
        self.c_proj = nn.Linear(EMBED_DIM, EMBED_DIM)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(EMBED_DIM, dim=2)
        q = q.view(B, T, NUM_HEADS, C // NUM_HEADS).transpose(1, 2)
        k = k.view(B, T, NUM_HEADS, C // NUM_HEADS).transpose(1, 2)
        v = v.view(B, T, NUM_HEADS, C // NUM_HEADS).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(EMBED_DIM)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(EMBED_DIM)
        self.mlp = nn.Sequential(nn.Linear(EMBED_DIM, 4 * EMBED_DIM), nn.GELU(),
                                 nn.Linear(4 * EMBED_DIM, EMBED_DIM))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.block_size = BLOCK_SIZE
        self.wte = nn.Embedding(VOCAB_SIZE, EMBED_DIM)
        self.wpe = nn.Embedding(BLOCK_SIZE, EMBED_DIM)
        self.h = nn.ModuleList([Block() for _ in range(NUM_LAYERS)])
        self.ln_f = nn.LayerNorm(EMBED_DIM)
        self.lm_head = nn.Linear(EMBED_DIM, VOCAB_SIZE, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        else:
            logits = self.lm_head(x[:, [-1], :])  # only the last position is sampled from
            loss = None
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        """Greedy decoding from the last `block_size` tokens of the sequence so far."""
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            idx_next = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def make_loader() -> DataLoader:
    data = torch.randint(0, VOCAB_SIZE, (NUM_SEQUENCES, BLOCK_SIZE + 1))
    return DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=BATCH_SIZE)


def train(model, loader, optimizer):
    """One epoch; returns the per-batch losses."""
    model.train()
    losses = []
    for x, y in loader:
        logits, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def main():
    torch.manual_seed(0)
    loader = make_loader()
    model = GPT()
    model.compile()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = train(model, loader, optimizer)
    model.eval()
    tokens = model.generate(torch.zeros((1, 1), dtype=torch.long), NEW_TOKENS)
    print(f"losses {[round(v, 4) for v in losses.tolist()]}")
    print(f"sampled {tokens.tolist()[0]}")
    return {"losses": losses, "tokens": tokens, "lm_head": model.lm_head.weight.detach().clone()}


if __name__ == "__main__":
    main()
