"""How much slower a program runs under `recompile-fix profile` than on its own.

The recorder adds work to every compile (stack capture, guard-failure bookkeeping, graph-break
logging), so its cost shows where compile time dominates. This runs such example programs with
the default inductor backend, each run cold (a fresh inductor cache directory and caches
disabled, so no run reuses another's kernels), alternating plain and profiled runs so that
drift in machine load hits both alike, and reports median wall seconds and their ratio.

    python bench/profile_overhead.py [--runs 3] [--programs deep_blocks,float_constants]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROGRAMS = ("deep_blocks", "float_constants", "growing_shape")


def cold_inductor_env(cache_dir: str) -> dict[str, str]:
    """The environment for one run: inductor writes to `cache_dir` and reads no cache."""
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    return env


def program_path(program: str) -> str:
    return str(REPO_ROOT / "examples" / f"{program}.py")


def timed_run(build_argv: Callable[[str], list[str]]) -> float:
    """Wall seconds of one cold run of `build_argv(scratch_dir)`; raises if it fails."""
    with tempfile.TemporaryDirectory(prefix="profile-overhead-") as scratch:
        argv = build_argv(scratch)
        started = time.perf_counter()
        completed = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=cold_inductor_env(scratch),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        seconds = time.perf_counter() - started
    if completed.returncode != 0:
        tail = "\n".join(completed.stdout.splitlines()[-20:])
        raise RuntimeError(f"{' '.join(argv)} exited with {completed.returncode}:\n{tail}")
    return seconds


def plain_argv(program: str, scratch: str) -> list[str]:
    return [sys.executable, program_path(program)]


def profiled_argv(program: str, scratch: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "recompile_fix",
        "profile",
        "-o",
        f"{scratch}/profile.json",
        "--",
        sys.executable,
        program_path(program),
    ]


def measure(program: str, runs: int) -> tuple[list[float], list[float]]:
    """`runs` plain and `runs` profiled wall times of `program`, taken alternately."""
    plain, profiled = [], []
    for run in range(1, runs + 1):
        plain.append(timed_run(lambda scratch: plain_argv(program, scratch)))
        profiled.append(timed_run(lambda scratch: profiled_argv(program, scratch)))
        print(
            f"  {program} run {run}/{runs}: plain {plain[-1]:.2f} s, profiled {profiled[-1]:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    return plain, profiled


def print_table(medians: dict[str, tuple[float, float]]) -> None:
    print(f"{'program':24s} {'plain s':>9s} {'profiled s':>11s} {'ratio':>7s}")
    for program, (plain, profiled) in medians.items():
        print(f"{program:24s} {plain:9.2f} {profiled:11.2f} {profiled / plain:7.3f}")
    plain_total = sum(plain for plain, _ in medians.values())
    profiled_total = sum(profiled for _, profiled in medians.values())
    print(
        f"{'overall (sum of medians)':24s} {plain_total:9.2f} {profiled_total:11.2f} "
        f"{profiled_total / plain_total:7.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each kind per program")
    parser.add_argument(
        "--programs", default=",".join(DEFAULT_PROGRAMS), help="comma-separated example names (files in examples/)"
    )
    args = parser.parse_args()
    programs = [name.strip() for name in args.programs.split(",") if name.strip()]
    for program in programs:
        if not os.path.isfile(program_path(program)):
            parser.error(f"no such example: {program_path(program)}")
    medians = {}
    for program in programs:
        plain, profiled = measure(program, args.runs)
        medians[program] = (statistics.median(plain), statistics.median(profiled))
    print_table(medians)


if __name__ == "__main__":
    main()
