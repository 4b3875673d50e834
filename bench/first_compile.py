"""What the warm runner's one compile before it serves saves each run (_bootstrap/first_compile.py).

One process imports what the server imports (``zygote._preload``) and forks children that each
compile a small transformer block (eager backend, three sequence lengths: a recompile with dynamic
shapes), first as the server did before (imports only), then after ``compile_once``: the CPU of
each child (its whole run, as the kernel counts it), one batch then the other, in one process
(the compile cannot be taken back to alternate them).

    python bench/first_compile.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROGRAM = """
import torch

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm(x))

block = torch.compile(Block(), backend="eager")
for length in (5, 7, 9):
    block(torch.ones(2, length, 16))
"""


def _child_cpu() -> float:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            exec(compile(PROGRAM, "<block>", "exec"), {"__name__": "__main__"})
        except BaseException:  # noqa: BLE001 - reported as a failed run
            code = 1
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("the program failed in a child")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    import gc

    from recompile_fix._bootstrap.first_compile import compile_once
    from recompile_fix._bootstrap.zygote import _preload

    _preload()
    gc.collect()
    gc.freeze()  # as the server does before it forks
    before = [_child_cpu() for _ in range(args.runs)]
    if not compile_once():
        raise SystemExit("compile_once could not undo its compile")
    gc.collect()
    gc.freeze()
    after = [_child_cpu() for _ in range(args.runs)]
    b, a = statistics.median(before), statistics.median(after)
    print(f"a run's CPU, median of {args.runs}: imports only {b * 1000:.0f} ms, after one compile {a * 1000:.0f} ms")
    print(f"saved per run: {(b - a) * 1000:.0f} ms ({a / b:.2f}x)")


if __name__ == "__main__":
    main()
