"""A safe fix never makes a program fail: every program in examples/, golden/ and tests/programs
gets the safe fixes its Profile plans (`apply`, no --unsafe-fixes), and then

* still runs: exits as it did when it was profiled (0, or its own deliberate exit code);
* `apply --check` with the same Profile exits 0 (a second apply has nothing to do);
* profiled again, the fixes already in the code are recognised: a second round adds no line
  that is already right beside it (issue 14, failure 3: `mark_dynamic(idx_cond, ...)` inserted
  under the identical line from round one).

Affordable: the eager backend; the Profiles golden cases already recorded, and for a golden
case whose safe fixes are its `program.out.py`, the run the golden equivalence test makes of it
(shared in the session); no run at all for a program whose safe fixes change nothing (it runs as
it was profiled). Golden cases are profiled again by their own tests (`test_golden`); the other
programs are profiled again here.
"""

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import PROGRAMS, ROOT, run_cli
from equivalence import run_recorded
from golden_cases import CASES, LANE_PACKAGES
from recompile_fix.profile.model import Profile

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Program:
    id: str
    files: Path  # what to copy: a directory (its Python files) or one file
    run: str  # the script, relative to the copy
    profile: Path | None = None  # a Profile the tool recorded on it, if there is one
    name_as: str | None = None  # the name the Profile knows the file by
    requires: tuple[str, ...] = ()  # packages only the torch 2.14.1 lane installs (golden_cases)

    @property
    def cwd(self) -> str:
        return str(Path(self.run).parent)


def _programs() -> list:
    found = [
        Program("examples/run_all", ROOT / "examples", "run_all.py"),
        # Issue 14's failure 1 (RF001 marked `targets` but filed the tied mark on the inputs as
        # unsafe: ConstraintViolationError) is gone with per-call-site evidence (issue 13).
        Program("examples/train_generate", ROOT / "examples" / "train_generate.py", "train_generate.py"),
    ]
    for case in CASES:  # the Profile golden/ recorded, on the program named program.py
        found.append(
            Program(
                f"golden/{case.id}", case.path, "program.py", case.path / "profile.json", "program.py", case.requires
            )
        )
    found.append(Program("two_files", PROGRAMS / "two_files", "main.py", PROGRAMS / "two_files" / "profile.json"))
    found.append(
        Program(
            "trains_elsewhere",
            PROGRAMS / "trains_elsewhere",
            "train.py",
            PROGRAMS / "trains_elsewhere" / "profile.json",
        )
    )
    found.append(Program("sibling", PROGRAMS / "sibling", "scripts/train.py"))
    for folder in ("edge", "rf001", "rf005", "seeds", "verify"):
        for script in sorted((PROGRAMS / folder).glob("*.py")):
            found.append(Program(f"{folder}/{script.stem}", script, script.name))
    # tests/programs/distributed needs torchrun and two ranks: test_distributed applies the fixes
    # and runs the fixed program on both.
    return found


def _stage(program: Program, tmp: Path) -> Path:
    work = tmp / "work"
    if program.files.is_dir():
        shutil.copytree(
            program.files,
            work,
            ignore=shutil.ignore_patterns("__pycache__", "profile.json", "program.out.py", "case.toml"),
        )
    else:
        work.mkdir()
        shutil.copy(program.files, work / program.files.name)
    if program.name_as is not None:
        (work / "program.in.py").rename(work / program.name_as)
    return work


def _adjacent_duplicates(text: str, added: list[str]) -> list[str]:
    """Added lines that equal the line right above or below them (blank lines aside)."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if (
            line.strip()
            and line in added
            and line in (lines[i - 1] if i else None, lines[i + 1] if i + 1 < len(lines) else None)
        ):
            found.append(line)
    return found


def _profile(work: Path, program: Program, output: str) -> int:
    result = run_cli(
        "profile",
        "--backend",
        "eager",
        "-o",
        str(work / output),
        "--",
        "python",
        Path(program.run).name,
        cwd=work / program.cwd,
    )
    assert result.returncode == Profile.load(work / output).exit_code
    return result.returncode


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, marks=[getattr(pytest.mark, LANE_PACKAGES[r]) for r in p.requires]) for p in _programs()],
    ids=lambda p: p.id,
)
def test_safe_fixes_keep_the_program_running(program, tmp_path):
    work = _stage(program, tmp_path)
    before = {p: p.read_text() for p in work.rglob("*.py")}
    profile = work / "profile.json"
    if program.profile is not None:
        shutil.copy(program.profile, profile)
        exit_code = Profile.load(profile).exit_code
    else:
        exit_code = _profile(work, program, "profile.json")
    where = work / program.cwd
    run_cli("apply", ".", "--profile", str(profile), cwd=where, check=0)
    changed = {p: p.read_text() for p in work.rglob("*.py") if p.read_text() != before[p]}
    if not changed:
        return  # nothing changed: it runs as it did when profiled
    if program.id.startswith("golden/"):
        fixed = work / "program.py"
        expected = program.files / "program.out.py"
        # The golden equivalence test runs program.out.py: the same run, made once in the session.
        run_recorded(expected if fixed.read_text() == expected.read_text() else fixed, tmp_path)
        run_cli("apply", ".", "--profile", str(profile), "--check", cwd=where, check=0)
        return
    # It still runs, as it did before the fixes.
    assert _profile(work, program, "after.json") == exit_code, (work / program.run).read_text()
    # A second apply has nothing to do.
    run_cli("apply", ".", "--profile", str(profile), "--check", cwd=where, check=0)
    # Profiled again: what the fixes put in is recognised, never made a second time.
    diff = run_cli("apply", ".", "--profile", str(work / "after.json"), "--diff", cwd=where).stdout
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    run_cli("apply", ".", "--profile", str(work / "after.json"), cwd=where)
    for path in changed:
        assert _adjacent_duplicates(path.read_text(), added) == [], diff
