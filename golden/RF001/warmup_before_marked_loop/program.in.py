"""A server-style loop: one warm-up call on a dummy batch at start-up, then requests of varying
batch size, each marked dynamic the way the PyTorch docs show. The warm-up compiled a static
graph that the marked requests cannot use."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
compiled = torch.compile(model)

with torch.no_grad():
    compiled(torch.zeros(8, 16))  # warm-up
    for batch_size in (3, 5, 9, 12):
        requests = torch.randn(batch_size, 16)
        torch._dynamo.mark_dynamic(requests, 0)
        print(compiled(requests).argmax(-1).tolist())
