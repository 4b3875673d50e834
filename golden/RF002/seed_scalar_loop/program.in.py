"""The recompilation guide's "wrapping constants" loop, compiled with dynamic=False (x keeps
its shape: with torch.ones(i) the shape change is a second recompile cause, RF001's)."""

import torch

torch._logging.set_logs(recompiles=True)


@torch.compile(dynamic=False)
def fn(x, c):
    return x + c


for i in range(5):
    fn(torch.ones(3), 0.5 + i)
