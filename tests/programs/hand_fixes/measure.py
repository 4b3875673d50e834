"""Issue 15: compiles (torch's own count over all frames, eager backend) and output equality of
each new golden case's original, the program `apply` writes (program.out.py) and the hand fixes
in this folder, each run by tests/programs/run_recording.py.

usage: .venv/bin/python tests/programs/hand_fixes/measure.py
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "golden"
HERE = Path(__file__).resolve().parent
HARNESS = ROOT / "tests" / "programs" / "run_recording.py"
CASES = {
    "RF008/early_dropout": ["early_dropout_disable.py", "early_dropout_ftensor.py", "early_dropout_mask_outside.py"],
    "RF008/stochastic_depth": ["stochastic_depth_tensor.py"],
    "RF009/numpy_schedule": [],
    "RF009/list_schedule": [],
    "RF002/sampling_temperature": ["sampling_both.py"],
    "RF010/config_field": [],
    "RF006/base_in_other_file": [],
}


def run(script: Path) -> dict | str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.pt"
        done = subprocess.run(
            [sys.executable, str(HARNESS), str(out), str(script)], capture_output=True, text=True, cwd=script.parent
        )
        if done.returncode:
            return "failed: " + done.stderr.strip().splitlines()[-1]
        return torch.load(out, weights_only=True)


def same(before: dict, after: dict) -> str:
    if before["outputs"].keys() != after["outputs"].keys():
        return "n/a (other compiled callables)"
    try:
        for key, calls in before["outputs"].items():
            if len(calls) != len(after["outputs"][key]):
                return "n/a (other calls)"
            for b_call, a_call in zip(calls, after["outputs"][key]):
                for b, a in zip(b_call, a_call):
                    torch.testing.assert_close(a, b, rtol=0, atol=0)
    except AssertionError:
        return "DIFF"
    return "exact"


def main() -> None:
    print("| case | program | compiles | per frame | outputs vs original |")
    print("| --- | --- | --- | --- | --- |")
    for case, hands in CASES.items():
        before = run(GOLDEN / case / "program.in.py")
        assert isinstance(before, dict), before
        rows = [("original", before), ("apply", run(GOLDEN / case / "program.out.py"))]
        rows += [(f"hand: {name}", run(HERE / name)) for name in hands]
        for label, result in rows:
            if isinstance(result, str):
                print(f"| {case} | {label} | {result} | | |")
            else:
                total = sum(result["compiles"].values())
                print(f"| {case} | {label} | {total} | {result['compiles']} | {same(before, result)} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
