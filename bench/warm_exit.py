"""How long a program run takes to end: from its last line to the exit status in the caller's
hands, for a warm run (a child of the torch-loaded server) and a cold one (its own interpreter).

A warm child ends without the interpreter's teardown of every module (``_bootstrap/zygote._end``):
in a forked child, freeing the server's objects writes to each page they sit on, a copy of each.
The program prints the time at its last line; the caller notes the time the run's status came.
Runs alternate warm and cold; the script prints the median of each and their ratio.

    python bench/warm_exit.py [--runs 10] [--preload transformers.modeling_utils]
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

REPO_ROOT = Path(__file__).resolve().parent.parent
PROGRAM = "import time\nimport torch\n\nx = torch.ones(3) * 2\nprint(time.time())\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--preload", default="", help="RECOMPILE_FIX_WARM_PRELOAD for the server")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))
    from recompile_fix.profile import warm

    work = Path(tempfile.mkdtemp(prefix="warm-exit-"))
    (work / "prog.py").write_text(PROGRAM)
    os.environ[warm.WARM_DIR_ENV] = str(work / "servers")  # where this process's runs find servers
    env = dict(os.environ)
    if args.preload:
        env[warm.PRELOAD_ENV] = args.preload
    argv = [sys.executable, "prog.py"]
    assert warm.run_captured(argv, env=env, cwd=str(work)) is not None, "no warm server here"
    ends: dict[str, list[float]] = {"warm": [], "cold": []}
    try:
        for _ in range(args.runs):
            for how in ends:
                if how == "warm":
                    done = warm.run_captured(argv, env=env, cwd=str(work))
                    assert done is not None and done[0] == 0, done
                    out = done[1]
                else:
                    cold = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=True)
                    out = cold.stdout
                ends[how].append(time.time() - float(out.split()[-1]))
    finally:
        warm.stop_servers(work / "servers")
    warm_ms, cold_ms = (1000 * statistics.median(ends[h]) for h in ("warm", "cold"))
    print(f"last line -> exit status, median of {args.runs}: warm {warm_ms:.0f} ms, cold {cold_ms:.0f} ms")
    print(f"warm / cold: {warm_ms / cold_ms:.2f}x")


if __name__ == "__main__":
    main()
