import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import steplib  # noqa: E402


@torch.compile
def scale(x):
    return x * 2 + 1


def shift(x):
    return x - 1


shift_compiled = torch.compile(shift)

outputs = []
for n in (2, 3, 4):
    x = torch.ones(n, 4)
    outputs.append(steplib.run(scale, x))
for n in (2, 3, 4):
    y = torch.ones(n, 4)
    outputs.append(steplib.run_copy(shift_compiled, y))
