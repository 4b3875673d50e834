"""Golden files: per rule and case, the input program, the Profile the tool recorded on it, and
the source a careful engineer would have written. `apply` must produce exactly that source, and
the rewritten program must compute the same tensors while compiling fewer times.

Regenerate (re-record the Profile, rewrite the expected output) only on purpose:
    pytest tests/test_golden.py --update-golden
"""

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli, run_cli_here
from equivalence import assert_same_outputs, run_recorded, total_compiles
from golden_cases import CASES, LANE_PACKAGES, case_id


def _stage(case: Path, tmp: Path) -> Path:
    work = tmp / case.name
    work.mkdir()
    shutil.copy(case / "program.in.py", work / "program.py")
    for extra in case.glob("*.py"):
        if extra.name not in ("program.in.py", "program.out.py"):
            shutil.copy(extra, work / extra.name)
    for package in case.glob("*/__init__.py"):  # a package of the program's (imported, not rewritten)
        shutil.copytree(package.parent, work / package.parent.name, ignore=shutil.ignore_patterns("__pycache__"))
    return work


def _drop_interpreter(path: Path) -> None:
    """A case is no one machine's: the recording interpreter's directories are left out (its
    library files are spelled by import path, found again under whichever interpreter runs)."""
    data = json.loads(path.read_text())
    if data.pop("interpreter", None) is not None:
        path.write_text(json.dumps(data, indent=1) + "\n")


@pytest.mark.parametrize("spec", CASES, ids=case_id)
def test_golden_apply(spec, tmp_path, request):
    case = spec.path
    work = _stage(case, tmp_path)
    update = request.config.getoption("--update-golden")
    if update:
        backend = ["--backend", "eager"] if spec.profile_backend == "eager" else []
        run_cli("profile", "-o", str(case / "profile.json"), *backend, "--", "python", "program.py", cwd=work, check=0)
        _drop_interpreter(case / "profile.json")
    profile = work / "profile.json"  # apply records what it did in its Profile: give it a copy
    shutil.copy(case / "profile.json", profile)
    # unsafe-fixes: the case's fix is unsafe (e.g. RF005's graph break): apply it, and only the
    # case's own rule's fixes (other rules' unsafe fixes are their own cases' business).
    flags = ["--unsafe-fixes", "--select", spec.rule] if spec.unsafe_fixes else []
    run_cli_here("apply", ".", "--profile", str(profile), *flags, cwd=work, check=0)
    result = (work / "program.py").read_text()
    expected = case / "program.out.py"
    if update:
        expected.write_text(result)
    assert result == expected.read_text()
    assert (result != (case / "program.in.py").read_text()) == spec.changes, "case.toml: changes"
    again = run_cli_here("apply", ".", "--profile", str(profile), *flags, cwd=work, check=0)
    assert (work / "program.py").read_text() == result, "a second apply changed the file"
    assert "already fixed" in again.stderr or "Fixed 0" in again.stderr


# The torch 2.14.1 lane runs one case per torch API the rules write (README, .ci/run).
TORCH_LANE = {
    "RF001/cropped_generate",  # mark_dynamic and a contiguous copy
    "RF001/specialized_dim",  # maybe_mark_dynamic
    "RF002/seed_loop_as_written",  # mark_unbacked, a 0-d tensor
    "RF003/seed_lr_scheduler",  # a tensor lr
    "RF004/deep_blocks_module",  # nested_compile_region
    "RF005/seed_very_large_function",  # graph_break
    "RF006/counter_in_branch",  # dynamic_sources
    "RF006/training_step_counter",  # a buffer
}


def _lane_marks(case):
    """The torch 2.14.1 lane runs the cases of TORCH_LANE, and those whose model code only it
    installs (case.toml's `requires`, each package its own marker: the main lane deselects them)."""
    marks = [getattr(pytest.mark, LANE_PACKAGES[package]) for package in case.requires]
    if case.id in TORCH_LANE:
        marks.append(pytest.mark.torch_lane)
    return pytest.param(case, marks=marks)


@pytest.mark.parametrize("spec", [_lane_marks(c) for c in CASES if c.changes], ids=case_id)
@pytest.mark.slow
def test_golden_equivalence(spec, tmp_path):
    case = spec.path
    before = run_recorded(case / "program.in.py", tmp_path)
    after = run_recorded(case / "program.out.py", tmp_path)
    # outputs = "exact" (case.toml says why): bit-identical, not only within assert_close.
    if spec.compiles == "regional":
        # RF007 compiles the blocks instead of the model: the callables differ, so the tensors the
        # program keeps (its globals) are compared; one compile serves every block (two where the
        # first block's input needs no grad).
        assert_same_outputs(before, after, exact=spec.outputs == "exact", of="globals")
        assert all(n <= 2 for n in after["compiles"].values()), (before["compiles"], after["compiles"])
        return
    assert_same_outputs(before, after, exact=spec.outputs == "exact")
    if spec.compiled_once:  # the frames named there compiled more than once, now once
        for name in spec.compiled_once:
            assert before["compiles"][name] > 1 and after["compiles"][name] == 1, (
                before["compiles"],
                after["compiles"],
            )
    elif spec.compiles == "same":  # a compile-time fix (RF004): as many compiles, each cheaper
        assert total_compiles(after) == total_compiles(before), (before["compiles"], after["compiles"])
    else:
        assert total_compiles(after) < total_compiles(before), (before["compiles"], after["compiles"])
