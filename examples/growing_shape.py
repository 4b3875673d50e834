"""Autoregressive generation whose input grows by one token per step.

`generate` calls the compiled model with a sequence one token longer each time. The first
compile specialises on the prompt length, so the second call recompiles `forward` with a size
mismatch at dim 1 of its input; after that automatic dynamic shapes take over.
The prompt has 2 tokens (not 1) so 0/1 specialisation plays no part, and the sequence is never
cropped (block size > final length) so no strided view adds a second recompile.
"""

import torch
import torch.nn.functional as F
from torch import nn

VOCAB_SIZE = 32
BLOCK_SIZE = 16
EMBED_DIM = 16
NUM_HEADS = 2
NUM_LAYERS = 2
PROMPT_LENGTH = 2
NEW_TOKENS = 6


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        batch, seq_len, embed_dim = x.shape
        q, k, v = self.qkv(x).split(embed_dim, dim=2)
        heads = (batch, seq_len, self.num_heads, embed_dim // self.num_heads)
        q, k, v = (t.view(heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, seq_len, embed_dim))


class Block(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.attn_norm = nn.LayerNorm(embed_dim)
        self.attn = CausalSelfAttention(embed_dim, num_heads)
        self.mlp_norm = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(nn.Linear(embed_dim, 4 * embed_dim), nn.GELU(),
                                 nn.Linear(4 * embed_dim, embed_dim))

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB_SIZE, EMBED_DIM)
        self.position_embedding = nn.Embedding(BLOCK_SIZE, EMBED_DIM)
        self.blocks = nn.ModuleList(Block(EMBED_DIM, NUM_HEADS) for _ in range(NUM_LAYERS))
        self.final_norm = nn.LayerNorm(EMBED_DIM)
        self.lm_head = nn.Linear(EMBED_DIM, VOCAB_SIZE, bias=False)

    def forward(self, idx):
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.final_norm(x))

    @torch.no_grad()
    def generate(self, idx, steps: int):
        """Greedy decoding: append the most likely next token `steps` times."""
        for _ in range(steps):
            idx_cond = idx
            logits = self(idx_cond)
            next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            idx = torch.cat((idx, next_token), dim=1)
        return idx


def main():
    torch.manual_seed(0)
    model = TinyGPT().eval()
    model.compile()
    prompt = torch.randint(0, VOCAB_SIZE, (1, PROMPT_LENGTH))
    tokens = model.generate(prompt, NEW_TOKENS)
    return {"tokens": tokens}


if __name__ == "__main__":
    main()
