"""Golden files: per rule and case, the input program, the Profile the tool recorded on it, and
the source a careful engineer would have written. `apply` must produce exactly that source, and
the rewritten program must compute the same tensors while compiling fewer times.

Regenerate (re-record the Profile, rewrite the expected output) only on purpose:
    pytest tests/test_golden.py --update-golden
"""

import shutil
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from equivalence import assert_same_outputs, run_recorded, total_compiles

GOLDEN = ROOT / "golden"
CASES = sorted(p for p in GOLDEN.glob("RF*/*") if (p / "program.in.py").exists())


def _stage(case: Path, tmp: Path) -> Path:
    work = tmp / case.name
    work.mkdir()
    shutil.copy(case / "program.in.py", work / "program.py")
    for extra in case.glob("*.py"):
        if extra.name not in ("program.in.py", "program.out.py"):
            shutil.copy(extra, work / extra.name)
    return work


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_apply(case, tmp_path, request):
    work = _stage(case, tmp_path)
    update = request.config.getoption("--update-golden")
    if update:
        run_cli(
            "profile",
            "-o",
            str(case / "profile.json"),
            "--backend",
            "eager",
            "--",
            "python",
            "program.py",
            cwd=work,
            check=0,
        )
    profile = work / "profile.json"  # apply records what it did in its Profile: give it a copy
    shutil.copy(case / "profile.json", profile)
    # UNSAFE_FIXES: the case's fix is unsafe by class (e.g. RF005's graph break): apply it, and only
    # the case's own rule's fixes (other rules' unsafe fixes are their own cases' business).
    flags = ["--unsafe-fixes", "--select", case.parent.name] if (case / "UNSAFE_FIXES").exists() else []
    run_cli("apply", ".", "--profile", str(profile), *flags, cwd=work, check=0)
    result = (work / "program.py").read_text()
    expected = case / "program.out.py"
    if update:
        expected.write_text(result)
    assert result == expected.read_text()
    again = run_cli("apply", ".", "--profile", str(profile), *flags, cwd=work, check=0)
    assert (work / "program.py").read_text() == result, "a second apply changed the file"
    assert "already fixed" in again.stderr or "Fixed 0" in again.stderr


@pytest.mark.parametrize(
    "case", [c for c in CASES if not (c / "NO_CHANGE").exists()], ids=lambda p: f"{p.parent.name}/{p.name}"
)
@pytest.mark.slow
def test_golden_equivalence(case, tmp_path):
    before = run_recorded(case / "program.in.py", tmp_path)
    after = run_recorded(case / "program.out.py", tmp_path)
    # EXACT (its text says why): the outputs must be bit-identical, not only within assert_close.
    assert_same_outputs(before, after, exact=(case / "EXACT").exists())
    if (case / "COMPILES_ONCE").exists():  # the frames named there compiled more than once, now once
        for name in (case / "COMPILES_ONCE").read_text().split():
            assert before["compiles"][name] > 1 and after["compiles"][name] == 1, (
                before["compiles"],
                after["compiles"],
            )
    elif (case / "SAME_COMPILES").exists():  # a compile-time fix (RF004): as many compiles, each cheaper
        assert total_compiles(after) == total_compiles(before), (before["compiles"], after["compiles"])
    else:
        assert total_compiles(after) < total_compiles(before), (before["compiles"], after["compiles"])
