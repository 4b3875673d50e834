"""Run an original and a rewritten program side by side and compare them."""

import hashlib
import subprocess
import sys
from pathlib import Path

import torch

HARNESS = Path(__file__).resolve().parent / "programs" / "run_recording.py"


_RUNS: dict[tuple[str, str], dict] = {}


def run_recorded(script: Path, tmp: Path) -> dict:
    """The recording of one run of ``script``. Runs are deterministic (same seed, eager backend),
    so a program whose bytes were already run in this test session is not run again."""
    key = (str(Path(script).resolve()), hashlib.sha256(Path(script).read_bytes()).hexdigest())
    if key not in _RUNS:
        out = tmp / f"{script.stem}.{abs(hash(str(script)))}.pt"
        done = subprocess.run(
            [sys.executable, str(HARNESS), str(out), str(script)], capture_output=True, text=True, cwd=script.parent
        )
        assert done.returncode == 0, done.stderr[-3000:]
        _RUNS[key] = torch.load(out, weights_only=True)
    return _RUNS[key]


def assert_same_outputs(before: dict, after: dict, *, exact: bool = False) -> int:
    """Every compiled callable returned the same tensors in both runs. Returns how many compared."""
    assert before["outputs"].keys() == after["outputs"].keys()
    compared = 0
    for key, calls in before["outputs"].items():
        assert len(calls) == len(after["outputs"][key]), key
        for b_call, a_call in zip(calls, after["outputs"][key]):
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
