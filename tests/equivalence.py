"""Run an original and a rewritten program side by side and compare them."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from conftest import preload_env, require_slow
from recompile_fix.profile import warm

HARNESS = Path(__file__).resolve().parent / "programs" / "run_recording.py"


_RUNS: dict[tuple[str, str], dict] = {}
# A directory every pytest-xdist worker shares (tests/conftest.py makes it), so that a program
# run by one worker is not run again by another.
RUNS_DIR_ENV = "RECOMPILE_FIX_TEST_RUNS"


def run_recorded(script: Path, tmp: Path) -> dict:
    """The recording of one run of ``script``. Runs are deterministic (same seed, eager backend),
    so a program whose bytes were already run in this test session is not run again."""
    require_slow(f"a recorded run of {Path(script).name}")  # cached or not: alone, the test runs it
    key = (str(Path(script).resolve()), hashlib.sha256(Path(script).read_bytes()).hexdigest())
    if key not in _RUNS:
        shared = os.environ.get(RUNS_DIR_ENV)
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:32]
        cached = Path(shared, f"{digest}.pt") if shared else None
        if cached is None or not cached.exists():
            out = tmp / f"{script.stem}.{abs(hash(str(script)))}.pt"
            argv = [sys.executable, str(HARNESS), str(out), str(script)]
            env = {**os.environ, **preload_env(script)}
            done = warm.run_captured(argv, env=env, cwd=str(script.parent))
            if done is None:
                cold = subprocess.run(argv, capture_output=True, text=True, cwd=script.parent, env=env)
                done = (cold.returncode, cold.stdout, cold.stderr)
            assert done[0] == 0, done[2][-3000:]
            if cached is not None:
                shutil.copy(out, f"{cached}.{os.getpid()}")
                os.replace(f"{cached}.{os.getpid()}", cached)
            else:
                cached = out
        _RUNS[key] = torch.load(cached, weights_only=True)
    return _RUNS[key]


def profile_recorded(work: Path, script: str, *flags: str):
    """`recompile-fix profile --backend eager FLAGS` of ``python SCRIPT`` from ``work``, the
    program run by the recording harness: the Profile is written as for ``python SCRIPT``, and
    the same run is ``run_recorded``'s recording of ``work/SCRIPT`` (one run where a test needs
    both). Returns (the profile command's result, the recording)."""
    from conftest import run_cli

    path = work / script
    out = work.parent / f"{path.stem}.profiled.pt"
    args = ("profile", "--backend", "eager", *flags, "--", "python", str(HARNESS), str(out), script)
    done = run_cli(*args, cwd=work, check=0)
    key = (str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest())
    _RUNS[key] = torch.load(out, weights_only=True)
    return done, _RUNS[key]


def assert_same_outputs(before: dict, after: dict, *, exact: bool = False, of: str = "outputs") -> int:
    """Every compiled callable returned the same tensors in both runs (``of="globals"``: the
    tensors the program keeps in its globals). Returns how many compared."""
    assert before[of].keys() == after[of].keys()
    compared = 0
    for key, calls in before[of].items():
        assert len(calls) == len(after[of][key]), key
        for b_call, a_call in zip(calls, after[of][key]):
            assert len(b_call) == len(a_call)
            for b, a in zip(b_call, a_call):
                if exact:
                    torch.testing.assert_close(a, b, rtol=0, atol=0)
                else:
                    torch.testing.assert_close(a, b)
                compared += 1
    assert compared > 0, "the programs returned no tensors from compiled code"
    return compared


def total_compiles(run: dict) -> int:
    return sum(run["compiles"].values())
