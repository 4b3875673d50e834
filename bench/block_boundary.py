"""What compiling a model's blocks one by one (RF007) adds to each call, against the constant of
`recompile_fix.rules.rf007_regional_compile.block_boundaries` by which RF007 weighs itself
against RF004 for inference: `SECONDS_PER_INPUT`, the steady-state cost of a block boundary for
each input of the block's graph (its parameters and buffers, and its forward's arguments): the
block module's call, its graph's guards, the compiled code's per-input checks and the buffers it
allocates on its own.

Two stacks of 32 blocks: tiny blocks (LayerNorm + Linear, width 8: 4 parameters and `x`),
where the boundaries, not the arithmetic, make the difference, under the eager and the inductor
backends; and MLP blocks at the width of the 32-block bench (LayerNorm + 4x MLP, width 256,
2 x 64 tokens: 6 parameters and `x`), inductor. Each compiled whole (`torch.compile(model)`)
and with the blocks compiled one by one (`block.compile()`) in the same process, no_grad, one
intra-op thread, calls interleaved so that drift in machine load hits both alike (median of
`--calls` calls after warm-up): (one by one - whole) / blocks / graph inputs is the cost per input.
`bench/compile_time.py` measures it on whole models (its paired steady state).

    python bench/block_boundary.py [--blocks 32] [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def child(backend: str, width: int, blocks: int, calls: int) -> dict[str, float]:
    import torch
    from torch import nn

    torch.set_num_threads(1)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up = nn.Linear(width, 4 * width)
            self.down = nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))
            self.head = nn.Linear(width, width)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    torch.manual_seed(0)
    whole = torch.compile(Stack().eval(), backend=backend)
    one_by_one = Stack().eval()
    for block in one_by_one.blocks:
        block.compile(backend=backend)
    runs = {"whole": whole, "one_by_one": one_by_one}
    x = torch.randn(2, 64 if width > 8 else 16, width)
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.no_grad():
        for _ in range(5):
            for run in runs.values():
                run(x)
        for _ in range(calls):
            for name, run in runs.items():
                began = time.perf_counter()
                run(x)
                times[name].append(time.perf_counter() - began)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=32)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        backend, width = args.child
        print(json.dumps(child(backend, int(width), args.blocks, args.calls)))
        return

    import torch

    from recompile_fix.rules.rf007_regional_compile.block_boundaries import SECONDS_PER_INPUT

    print(f"torch {torch.__version__}, {args.blocks} blocks, median of {args.calls} interleaved calls")
    for backend, width in (("eager", 8), ("inductor", 8), ("inductor", 256)):
        argv = [sys.executable, __file__, "--child", backend, str(width)]
        argv += ["--blocks", str(args.blocks), "--calls", str(args.calls)]
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        seconds = json.loads(done.stdout.strip().splitlines()[-1])
        whole, one_by_one = seconds["whole"], seconds["one_by_one"]
        inputs = (4 if width == 8 else 6) + 1  # one block's parameters, and forward's `x`
        boundary = (one_by_one - whole) / args.blocks
        per_input = boundary / inputs
        print(
            f"  {backend:<8} width {width:<4} whole {1e3 * whole:8.2f} ms  one by one {1e3 * one_by_one:8.2f} ms "
            f"(x{one_by_one / whole:.3f})  per boundary {1e6 * boundary:6.1f} us, per input {1e6 * per_input:5.1f} us "
            f"= {per_input / SECONDS_PER_INPUT:.2f}x the tool's {1e6 * SECONDS_PER_INPUT:.0f} us",
            flush=True,
        )


if __name__ == "__main__":
    main()
