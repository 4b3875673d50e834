"""`verify` after `apply` (the README's order): no fix is pending, so the program runs once on
the tree as it is and is compared with the run the Profile recorded; the text says what was
compared (compiles, recompiles, limit hits; outputs not, the Profile keeps none), and a run
worse than the recorded one exits 1."""

import json

import pytest

from conftest import run_cli

PROGRAM = """\
import os

import torch


@torch.compile(backend="eager")
def fn(x):
    return x + 1


for n in (3, 4, 5, 6):
    fn(torch.ones(n))
if os.environ.get("WORSE"):  # two new dtypes: two more compiles than the recorded run
    fn(torch.ones(3, dtype=torch.float64))
    fn(torch.ones(3, dtype=torch.float16))
"""


@pytest.mark.slow
def test_verify_after_apply_compares_with_the_recorded_run(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    run_cli("profile", "--backend", "eager", "--", "python", "prog.py", cwd=tmp_path, check=0)
    run_cli("apply", ".", cwd=tmp_path, check=0)
    assert "torch._dynamo.mark_dynamic(x, 0)" in (tmp_path / "prog.py").read_text()

    done = run_cli("verify", cwd=tmp_path, check=0)
    assert "Nothing to verify" not in done.stdout
    assert "compared it with the run the Profile recorded" in done.stdout
    assert "Outputs were not compared (the Profile keeps none)" in done.stdout
    assert "Verified against the recorded run: compiles 2 -> 1, recompiles 1 -> 0" in done.stdout
    as_json = json.loads(run_cli("verify", "--json", cwd=tmp_path, check=0).stdout)
    assert as_json["against_recorded"] and as_json["fixes"] == []
    assert as_json["totals"]["compiles"] == {"before": 2, "after": 1}

    worse = run_cli("verify", cwd=tmp_path, check=1, env={"WORSE": "1"})
    assert "Worse than the recorded run:" in worse.stdout
    assert "more compiles: fn (prog.py:6): 2 -> 3" in worse.stdout
