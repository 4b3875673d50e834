"""What the warm runner saves: `recompile-fix profile` of one program, cold against warm.

Cold: each run starts its own interpreter (RECOMPILE_FIX_WARM=0), which imports torch. Warm: the
runs share a RECOMPILE_FIX_WARM_DIR, whose server imported torch once; its first run (the server
starting) is reported apart. Runs alternate cold and warm, so that drift in machine load hits
both alike; the script prints median wall seconds of each and their ratio, from this one run.
`verify` (two runs, the second warm in a private server) is timed the same way.

    python bench/warm_runner.py [--runs 3] [--program examples/growing_shape.py]
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
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # verify exits 1 when a fix is pending, never here
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--program", default="examples/growing_shape.py")
    args = parser.parse_args()
    tool = [sys.executable, "-m", "recompile_fix"]
    with (
        tempfile.TemporaryDirectory(prefix="warm-bench-") as scratch,
        tempfile.TemporaryDirectory(prefix="rfw-", dir="/tmp") as warm_dir,
    ):
        project = Path(scratch)
        program = project / Path(args.program).name
        shutil.copy(REPO_ROOT / args.program, program)
        profile = [*tool, "profile", "--backend", "eager", "--", sys.executable, program.name]
        verify = [*tool, "verify", "--backend", "eager", "--", sys.executable, program.name]
        base = {k: v for k, v in os.environ.items() if not k.startswith("RECOMPILE_FIX_WARM")}
        cold_env = {**base, "RECOMPILE_FIX_WARM": "0"}
        warm_env = {**base, "RECOMPILE_FIX_WARM_DIR": warm_dir}
        first = timed(profile, project, warm_env)
        cold, warm, cold_verify, warm_verify = [], [], [], []
        for _ in range(args.runs):
            cold.append(timed(profile, project, cold_env))
            warm.append(timed(profile, project, warm_env))
            cold_verify.append(timed(verify, project, cold_env))
            warm_verify.append(timed(verify, project, base))
        for pid_file in Path(warm_dir).glob("*.pid"):
            os.kill(int(pid_file.read_text()), 15)
    c, w = statistics.median(cold), statistics.median(warm)
    cv, wv = statistics.median(cold_verify), statistics.median(warm_verify)
    print(f"program: {args.program}, {args.runs} runs of each, alternating")
    print(f"profile cold  {c:7.2f} s (median)")
    print(f"profile warm  {w:7.2f} s (median; the server's first run: {first:.2f} s)")
    print(f"profile warm / cold: {w / c:.2f}")
    print(f"verify cold   {cv:7.2f} s (median)")
    print(f"verify warm   {wv:7.2f} s (median: its second run forks from the first's server)")
    print(f"verify warm / cold: {wv / cv:.2f}")


if __name__ == "__main__":
    main()
