"""An Euler sampler step (k-diffusion style) compiled on its own, the noise level and its
preconditioning passed as Python floats (a trial): `sigma` fills `x.new_full(...)`, where it must
stay a number, so it keeps the step recompiling whatever `c_in` and `c_skip` become."""

import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(9, 32), nn.SiLU(), nn.Linear(32, 8)).eval()


@torch.compile(backend="eager")
def euler_step(x, sigma, sigma_next, c_in, c_skip):
    inp = torch.cat([x * c_in, x.new_full((x.shape[0], 1), sigma)], 1)
    denoised = c_skip * x + net(inp)
    d = (x - denoised) / sigma
    return x + d * (sigma_next - sigma)


sigmas = torch.linspace(10.0, 0.1, 4).tolist() + [0.0]
x = torch.randn(4, 8) * sigmas[0]
with torch.no_grad():
    for i in range(len(sigmas) - 1):
        s, sn = sigmas[i], sigmas[i + 1]
        c_in = 1.0 / (s**2 + 1.0) ** 0.5
        c_skip = 1.0 / (s**2 + 1.0)
        x = euler_step(x, s, sn, c_in, c_skip)
