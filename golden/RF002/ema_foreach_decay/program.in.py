# An EMA of the weights whose decay ramps up with the step (timm's ModelEmaV3 style), updated by
# a compiled foreach lerp: torch reads the weight as a Python number, so no 0-d tensor can take
# its place without a graph break; traced as a float input, it compiles once.
import torch
import torch.nn as nn


@torch.compile(backend="eager")
def ema_lerp(ema_params, params, decay):
    torch._foreach_lerp_(ema_params, params, weight=1.0 - decay)
    return ema_params


torch.manual_seed(0)
model = nn.Linear(8, 4)
ema = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 5):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    decay = min(0.999, (1 + step) / (10 + step))
    with torch.no_grad():
        ema_lerp(ema, [p.detach() for p in model.parameters()], decay)
