"""The recompilation guide's "wrapping constants" loop exactly as written, under dynamic=False:
both the size of `x` and the value of `c` change on every call. Torch names only the first
failing guard (`c == 0.5`), so the size change shows only in the recorded shapes; sizes 0 and 1
are specialised even when marked dynamic."""

import torch


@torch.compile(dynamic=False)
def fn(x, c):
    return x + c


for i in range(5):
    fn(torch.ones(i), 0.5 + i)
