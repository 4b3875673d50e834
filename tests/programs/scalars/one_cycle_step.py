"""AdamW under OneCycleLR, which cycles the betas with the lr, its step compiled on its own (a new
user's trial): RF003's tensor lr leaves the betas' recompile; `dynamic=True` does not."""

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=8)


@torch.compile
def opt_step():
    opt.step()


for step in range(8):
    x = torch.randn(32, 16)
    F.mse_loss(model(x), x.sum(1, keepdim=True)).backward()
    opt_step()
    opt.zero_grad()
    sched.step()
