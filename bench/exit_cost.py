"""What a program run pays after its last line, and what the recorder's `gc.freeze()` saves.

A process that imported torch and compiled something ends slowly: the interpreter's shutdown
runs the garbage collector over every object torch and Dynamo made. The recorder freezes those
objects in its exit handler (recompile_fix/profile/recorder/install.py), so they are freed by
reference count only. This times one small compiled program (eager backend) as a plain
interpreter ends it and with `gc.freeze()` at exit, alternating the two so that drift in machine
load hits both alike, and prints the median seconds from the program's last line to the process's
end, and their ratio, from this one run.

    python bench/exit_cost.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

PROGRAM = """
import atexit, gc, sys, time
import torch

step = torch.compile(lambda x: x * 2 + 1, backend="eager")
for n in (3, 4, 5):
    step(torch.ones(n))
if {freeze}:
    atexit.register(gc.freeze)
print(time.time(), flush=True)
"""


def exit_seconds(freeze: bool) -> float:
    """Seconds from the program's last line to the end of its process."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(freeze=freeze)], capture_output=True, text=True, check=True
    )
    ended = time.time()
    return ended - float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    plain, frozen = [], []
    for _ in range(args.runs):
        plain.append(exit_seconds(freeze=False))
        frozen.append(exit_seconds(freeze=True))
    before, after = statistics.median(plain), statistics.median(frozen)
    print(f"exit after the last line, median of {args.runs}: plain {before:.3f} s, gc.freeze() {after:.3f} s")
    print(f"ratio (frozen / plain): {after / before:.2f}x")


if __name__ == "__main__":
    main()
