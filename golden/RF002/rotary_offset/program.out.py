"""Chunked prefill's rotary embedding, compiled on its own, as hand-written KV-cache code does it:
the position offset grows by one chunk per step and is a Python int the compiled code uses as a
size (`torch.arange(offset, offset + T)`), so no 0-d tensor can take its place; the config
names that one int dynamic."""

import torch

torch.compiler.config.dynamic_sources = "L['offset']"


@torch.compile
def rotary(q, offset):
    T, D = q.shape[-2], q.shape[-1]
    pos = torch.arange(offset, offset + T, dtype=torch.float32)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    angles = pos[:, None] * inv_freq[None, :]
    q1, q2 = q[..., ::2], q[..., 1::2]
    return torch.cat([q1 * angles.cos() - q2 * angles.sin(), q1 * angles.sin() + q2 * angles.cos()], dim=-1)


torch.manual_seed(0)
prompt = torch.randn(2, 16, 16)
chunks = []
for offset in range(0, 16, 4):  # four positions at a time
    chunks.append(rotary(prompt[:, offset : offset + 4], offset))
print(torch.cat(chunks, dim=1).sum().item())
