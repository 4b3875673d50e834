"""`recompile-fix fix` against one plain run of the same program, as a user runs both.

Issue 29's bar: `fix` on a nanoGPT-style train-then-generate script (examples/train_generate.py)
within 2.0x one plain run (`python train_generate.py`, its own backend). A fixed point needs at
least the profile run and one verified run, so two plain runs is the floor; the warm runner (one
server that imported torch for every run of `fix`) is what can take it under.

Each `fix` works on a fresh copy of the program (nothing written to examples/), in a fresh
process, as `recompile-fix fix -- python train_generate.py` (this interpreter); plain runs and
`fix` runs alternate so that drift in machine load hits both alike. All share one inductor cache
directory, warmed by an untimed plain run first: a user runs `fix` on a program they have run
(a cold cache would charge whichever runs first for every kernel). Prints the median wall
seconds of each and their ratio, from this one run.

    python bench/fix_speed.py [--runs 3] [--program examples/train_generate.py]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # fix exits 1 when fixes are left, never an error here
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--program", default="examples/train_generate.py")
    args = parser.parse_args()
    program = (REPO_ROOT / args.program).resolve()
    plain, fixed = [], []
    with tempfile.TemporaryDirectory(prefix="fix-speed-") as tmp:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp, "inductor"))}
        warm = Path(tmp, "warm-up")
        warm.mkdir()
        shutil.copy(program, warm / program.name)
        timed([sys.executable, program.name], warm, env)  # fills the kernel cache, untimed
        for run in range(args.runs):
            work = Path(tmp, f"run{run}")
            work.mkdir()
            shutil.copy(program, work / program.name)
            plain.append(timed([sys.executable, program.name], work, env))
            fix = [sys.executable, "-m", "recompile_fix", "fix", "--", sys.executable, program.name]
            fixed.append(timed(fix, work, env))
    p, f = statistics.median(plain), statistics.median(fixed)
    print(f"{args.program}: median of {args.runs}, its own backend")
    print(f"  one plain run:      {p:6.2f} s")
    print(f"  recompile-fix fix:  {f:6.2f} s   {f / p:.2f}x one plain run (bar: 2.0x)")


if __name__ == "__main__":
    main()
