"""Writing files when things go wrong: runs at once, a file that cannot be written, a full disk,
links. What held before (kill -9 never left a half-written file) must keep holding, and what did
not now holds:

* concurrent `apply` runs wrote `torch._dynamo.matorch.tensor(rk_, ...)dynamic(x, 0)`: the hash
  was checked when fixes were planned and the file read again at write time;
* static runs at once printed `internal error ... StopIteration()` (a stale cache entry fixed
  other bytes);
* an immutable file raised a traceback and lost the record of the files already written;
* a full disk left a truncated `profile.json.tmp`;
* symlinks were replaced by regular files, hard links split.
"""

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import HELPERS, MAIN, ROOT, run_cli
from recompile_fix.config import Config
from recompile_fix.errors import UserError
from recompile_fix.pipeline.fix import find, rewrite_files, run_apply, select_fixes, write_rewrites
from recompile_fix.profile.model import Profile, sha256_bytes
from recompile_fix.rules import ALL_RULES


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp"))


def _fixed_once(project: Path, tmp_path: Path) -> dict[str, bytes]:
    reference = tmp_path / "reference"
    shutil.copytree(project, reference)
    run_cli("apply", ".", cwd=reference, check=0)
    return {name: (reference / name).read_bytes() for name in ("main.py", "helpers.py")}


def _spawn(args, cwd, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "recompile_fix", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )


def test_concurrent_applies_write_each_fix_once(project, tmp_path, runs=4):
    expected = _fixed_once(project, tmp_path)
    for trial in range(3):
        work = tmp_path / f"trial-{runs}-{trial}"
        shutil.copytree(project, work)
        procs = [_spawn(["apply", ".", "--no-cache"], work) for _ in range(runs)]
        outs = [p.communicate(timeout=120) for p in procs]
        for proc, (_, err) in zip(procs, outs):
            assert proc.returncode == 0, err
            assert "error" not in err, err
        for name, data in expected.items():
            assert (work / name).read_bytes() == data
        fixed = [err for _, err in outs if "Fixed 2 finding(s) in 2 file(s)" in err]
        assert len(fixed) == 1, outs  # one run fixed both files; the others found them fixed
        profile = json.loads((work / ".recompile-fix" / "profile.json").read_text())
        assert profile["applied"] == {name: sha256_bytes(data) for name, data in expected.items()}
        assert _leftovers(work) == []


STATIC_BLOCKS = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return x + self.lin(x)


    class Model{n}(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(4))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x


    model = torch.compile(Model{n}().eval())
    """
)


def test_concurrent_static_runs_never_crash_or_double_apply(tmp_path):
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    for n in range(24):
        (tree / "pkg" / f"m{n}.py").write_text(STATIC_BLOCKS.format(n=n))
    reference = tmp_path / "reference"
    shutil.copytree(tree, reference)
    run_cli("apply", ".", "--unsafe-fixes", "-j", "1", cwd=reference, check=0)
    assert "nested_compile_region" in (reference / "pkg" / "m0.py").read_text()
    for trial in range(2):
        work = tmp_path / f"trial-{trial}"
        shutil.copytree(tree, work)
        procs = [_spawn(["apply", ".", "--unsafe-fixes", "-j", "1"], work) for _ in range(4)]
        procs += [_spawn(["apply", ".", "--diff", "-j", "1"], work) for _ in range(2)]
        for proc in procs:
            _, err = proc.communicate(timeout=180)
            assert "internal error" not in err and "Traceback" not in err, err
        for path in sorted((work / "pkg").iterdir()):
            assert path.read_bytes() == (reference / "pkg" / path.name).read_bytes(), path.name
        assert _leftovers(work) == []


# -- compare and swap, without the lock --------------------------------------------------------------
def _plan(project: Path):
    profile = Profile.load(project / ".recompile-fix" / "profile.json")
    result = find(["."], profile, ALL_RULES, root=project, config=Config(root=project))
    return profile, result


def test_a_file_changed_between_planning_and_rewriting_is_left_alone(project, monkeypatch):
    monkeypatch.chdir(project)
    profile, result = _plan(project)
    (project / "helpers.py").write_text(HELPERS.replace("(6, 7)", "(6, 7, 8)"))  # another run's write
    rewrites, failed = rewrite_files(
        project, select_fixes(result.findings, unsafe_fixes=False), ALL_RULES, result.planned_from
    )
    assert [path for path, _ in failed] == ["helpers.py"]
    assert "changed while it was being fixed" in failed[0][1]
    assert [r.path for r in rewrites] == ["main.py"]


def test_a_file_changed_between_rewriting_and_writing_is_left_alone(project, monkeypatch):
    monkeypatch.chdir(project)
    profile, result = _plan(project)
    rewrites, failed = rewrite_files(
        project, select_fixes(result.findings, unsafe_fixes=False), ALL_RULES, result.planned_from
    )
    assert failed == []
    (project / "helpers.py").write_text(HELPERS + "# written by another run\n")
    unwritten = write_rewrites(project, rewrites, profile)
    assert [(r.path, why) for r, why in unwritten] == [
        ("helpers.py", "helpers.py: changed while it was being fixed (another run at the same time?); not changed")
    ]
    assert (project / "helpers.py").read_text() == HELPERS + "# written by another run\n"
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()
    assert list(profile.applied) == ["main.py"]


# -- failed writes ------------------------------------------------------------------------------------
def _failing_replace(monkeypatch, name: str, error: int):
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == name:
            raise OSError(error, os.strerror(error), str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize(
    "error, words", [(errno.EPERM, "Operation not permitted"), (errno.ENOSPC, "No space left on device")]
)
def test_a_failed_write_is_one_line_and_the_other_files_are_written_and_recorded(project, monkeypatch, error, words):
    monkeypatch.chdir(project)
    profile = Profile.load(project / ".recompile-fix" / "profile.json")
    _failing_replace(monkeypatch, "main.py", error)
    result = run_apply(["."], profile, ALL_RULES, use_cache=False)
    assert result.errors == [f"main.py: cannot write: {words}; not changed"]
    assert (project / "main.py").read_text() == MAIN
    assert "mark_dynamic(y, 0)" in (project / "helpers.py").read_text()
    assert [r.path for r in result.rewrites] == ["helpers.py"]
    assert list(profile.applied) == ["helpers.py"]
    assert _leftovers(project) == []


SITECUSTOMIZE = """
import errno, os
_real = os.replace
def _replace(src, dst, *a, **k):
    if os.path.basename(str(dst)) == os.environ["FAIL_WRITE"]:
        raise PermissionError(errno.EPERM, "Operation not permitted", str(dst))
    return _real(src, dst, *a, **k)
os.replace = _replace
"""


def test_apply_with_a_file_it_cannot_write(project, tmp_path):
    """As `chattr +i main.py` does (os.replace raises EPERM): one line, exit 2, the other file
    fixed and recorded, so the next run calls it fixed, not stale."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {"FAIL_WRITE": "main.py", "PYTHONPATH": f"{inject}{os.pathsep}{ROOT}"}
    proc = _spawn(["apply", "."], project, env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert [line for line in err.splitlines() if "error" in line] == [
        "recompile-fix: error: main.py: cannot write: Operation not permitted; not changed"
    ]
    assert "Traceback" not in err
    assert (project / "main.py").read_text() == MAIN
    again = run_cli("apply", ".", cwd=project, check=0)
    assert "1 file(s) already fixed" in again.stderr and "stale" not in again.stderr
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()


def test_a_profile_that_cannot_be_written_stays_whole(tmp_path, monkeypatch):
    path = tmp_path / ".recompile-fix" / "profile.json"
    profile = Profile(command=["python", "x.py"], torch_version="2.13.0", python_version="3.11")
    profile.dump(path)
    before = path.read_bytes()
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    profile.command = ["python", "y.py"]
    with pytest.raises(UserError, match="cannot write the Profile: No space left on device"):
        profile.dump(path)
    monkeypatch.setattr(os, "fsync", real)
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


# -- links -------------------------------------------------------------------------------------------
def test_a_symlink_is_edited_through_and_kept(project):
    (project / "real").mkdir()
    shutil.move(project / "helpers.py", project / "real" / "helpers.py")
    (project / "helpers.py").symlink_to(Path("real") / "helpers.py")
    run_cli("apply", ".", cwd=project, check=0)
    assert (project / "helpers.py").is_symlink()
    assert "mark_dynamic(y, 0)" in (project / "real" / "helpers.py").read_text()


def test_a_symlink_out_of_the_project_and_a_hard_link_are_left_alone_with_a_note(project, tmp_path):
    outside = tmp_path / "outside.py"
    shutil.move(project / "helpers.py", outside)
    (project / "helpers.py").symlink_to(outside)
    os.link(project / "main.py", tmp_path / "main-link.py")
    result = run_cli("apply", ".", cwd=project, check=2)
    # A Profile naming a link out of the project is refused whole (issue 32: such a file is never
    # read, and planning without it chose other call sites); the link alone is noted per file.
    assert result.stderr.strip() == (
        f"recompile-fix: error: damaged Profile: the path 'helpers.py' is a link to '{outside}', out of the "
        "project; profile the program again"
    )
    assert (project / "helpers.py").is_symlink() and outside.read_text() == HELPERS
    assert (project / "main.py").read_text() == MAIN and os.stat(project / "main.py").st_nlink == 2
