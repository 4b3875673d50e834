import torch

mod = torch.nn.Linear(3, 3)
opt = torch.optim.Adam(mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)


@torch.compile
def gn(inp):
    opt.zero_grad(True)
    out = mod(inp).sum()
    out.backward()
    opt.step()
    sched.step()
    return out.detach()


for i in range(5):
    gn(torch.ones(3, 3))
