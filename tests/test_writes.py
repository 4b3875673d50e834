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
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow  # applies racing in processes of their own: seconds, no torch
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


@pytest.mark.slow  # applies racing in processes of their own: seconds, no torch
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


# -- an editor's save while apply writes (issue 32) --------------------------------------------------
EDITOR_SAVE = """
import os
import recompile_fix.pipeline.write as fix
def _save(path):
    if path.name == os.environ["SAVE_INTO"]:
        with open(path, "a") as fh:
            fh.write("# saved by the editor\\n")
fix._before_rename = _save
"""


def test_an_editor_save_while_the_temp_file_is_written_is_kept(project, tmp_path):
    """The save lands after the first comparison, while the temp file is written: it used to be
    overwritten and the file recorded as fixed. Now: the user's bytes, one line, exit 2, the
    file not recorded, no temp file left, and the next run fixes it from the saved bytes."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(EDITOR_SAVE)
    env = {"SAVE_INTO": "main.py", "PYTHONPATH": f"{inject}{os.pathsep}{ROOT}"}
    proc = _spawn(["apply", "."], project, env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert [line for line in err.splitlines() if "error" in line] == [
        "recompile-fix: error: main.py: changed while it was being fixed (another run at the same time?); not changed"
    ]
    assert (project / "main.py").read_text() == MAIN + "# saved by the editor\n"
    assert "mark_dynamic(y, 0)" in (project / "helpers.py").read_text()
    applied = json.loads((project / ".recompile-fix" / "profile.json").read_text())["applied"]
    assert list(applied) == ["helpers.py"]
    assert _leftovers(project) == []


def test_a_save_racing_the_write_in_process_keeps_the_users_bytes(project, monkeypatch):
    import recompile_fix.pipeline.write as fix

    monkeypatch.chdir(project)
    profile = Profile.load(project / ".recompile-fix" / "profile.json")
    saved = HELPERS.replace("(6, 7)", "(6, 7)  # typed while apply ran")

    def save(path: Path) -> None:
        if path.name == "helpers.py":
            path.write_text(saved)  # same size? no matter: the bytes differ

    monkeypatch.setattr(fix, "_before_rename", save)
    result = run_apply(["."], profile, ALL_RULES, use_cache=False)
    assert result.errors == [
        "helpers.py: changed while it was being fixed (another run at the same time?); not changed"
    ]
    assert (project / "helpers.py").read_text() == saved
    assert list(profile.applied) == ["main.py"]
    assert _leftovers(project) == []


def test_a_file_another_program_holds_locked_is_left_alone(project, monkeypatch):
    import fcntl

    monkeypatch.chdir(project)
    profile = Profile.load(project / ".recompile-fix" / "profile.json")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open('helpers.py'); fcntl.flock(f, fcntl.LOCK_EX); print(1, flush=True); "
            "time.sleep(60)",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "1"
        result = run_apply(["."], profile, ALL_RULES, use_cache=False)
    finally:
        holder.kill()
        holder.wait()
    assert fcntl  # the platform has advisory locks
    assert result.errors == ["helpers.py: locked by another program (an editor saving it?); not changed"]
    assert (project / "helpers.py").read_text() == HELPERS
    assert list(profile.applied) == ["main.py"]


# -- what a killed run left, modes, links (issue 32) ------------------------------------------------
def test_temp_files_a_killed_run_left_are_removed_by_the_next(project):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = [
        f".main.py.recompile-fix-{dead.stdout.strip()}-k3j9x.tmp",  # ours, its writer gone
        ".helpers.py.a1b2c3d4.tmp",  # as releases before named them
    ]
    kept = [
        ".main.py.recompile-fix-1-k3j9x.tmp",  # its writer (pid 1) still runs
        ".gone.py.a1b2c3d4.tmp",  # not beside a file of that name: not ours to judge
        "notes.tmp",  # the user's
    ]
    for name in stale + kept:
        (project / name).write_text("half a file")
    run_cli("apply", ".", cwd=project, check=0)
    assert sorted(p.name for p in project.iterdir() if p.name.endswith(".tmp")) == sorted(kept)
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()


def test_a_read_only_file_is_refused_and_modes_are_kept(project):
    os.chmod(project / "main.py", 0o444)
    os.chmod(project / "helpers.py", 0o755)
    result = run_cli("apply", ".", cwd=project, check=2)
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        "recompile-fix: error: main.py: is read-only (mode 0444); not changed (make it writable to fix it)"
    ]
    assert (project / "main.py").read_text() == MAIN
    assert os.stat(project / "main.py").st_mode & 0o777 == 0o444
    assert "mark_dynamic(y, 0)" in (project / "helpers.py").read_text()
    assert os.stat(project / "helpers.py").st_mode & 0o777 == 0o755


def test_a_symlink_to_a_file_in_the_project_is_one_file(tmp_path):
    """Scanned under both names, the file was fixed under one and then reported "changed while
    it was being fixed" under the other (exit 2)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m0.py").write_text(STATIC_BLOCKS.format(n=0))
    (tmp_path / "link.py").symlink_to(Path("pkg") / "m0.py")
    result = run_cli("apply", ".", "--unsafe-fixes", cwd=tmp_path, check=0)
    assert "changed while" not in result.stderr and "error" not in result.stderr, result.stderr
    assert "Fixed 1 finding(s) in 1 file(s)" in result.stderr
    assert result.stdout.splitlines()[0].startswith("pkg/m0.py:10:5: RF004")  # the file's own name
    assert (tmp_path / "link.py").is_symlink()
    assert (tmp_path / "pkg" / "m0.py").read_text().count("nested_compile_region") == 1
    again = run_cli("apply", ".", "--unsafe-fixes", cwd=tmp_path, check=0)
    assert "Fixed 0 finding(s)" in again.stderr


def test_temp_directories_of_a_killed_run_are_removed_at_the_next_start(tmp_path):
    """The copies `verify` and `fix` make live in temp directories named with their owner's pid:
    the next start removes those whose owner is gone, and only ours."""
    from recompile_fix.profile import scratch

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    gone = [f"recompile-fix-verify-{pid}-a1", f"recompile-fix-outputs-{pid}-b2", f"rfw-{pid}-c3"]
    kept = [f"recompile-fix-verify-{os.getpid()}-d4", "recompile-fix-verify-x", "torchinductor_root", "rfw-notes"]
    held = f"recompile-fix-fix-{pid}-e5"  # its pid looks gone (another pid namespace), its lock is held
    released = f"recompile-fix-fix-{os.getpid()}-f6"  # ours, its lock released: a run of ours that ended
    for name in [*gone, *kept, held, released]:
        (tmp_path / name / "tree").mkdir(parents=True)
        (tmp_path / name / "tree" / "main.py").write_text(MAIN)
    holding = scratch._hold(str(tmp_path / held))
    os.close(scratch._hold(str(tmp_path / released)))
    try:
        assert sorted(scratch.sweep(str(tmp_path), force=True)) == sorted([*gone, released])
    finally:
        os.close(holding)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, held])
    with scratch.scratch_dir("verify") as made:  # named for its owner, with the lock held
        assert Path(made).name.startswith(f"recompile-fix-verify-{os.getpid()}-")
        assert scratch.owned() == [made] and scratch._owned_now(Path(made), -1)
    assert not Path(made).exists() and scratch.owned() == []


def test_a_kept_directory_is_not_swept_by_another_process():
    """`verify` without torch keeps the recorded tensors past the run for the user's interpreter
    to compare: another recompile-fix process starting meanwhile must not take them for a dead
    run's (it did, when the copy carried an unheld `.owner` lock file)."""
    from recompile_fix.profile import scratch

    with scratch.scratch_dir("outputs") as out:
        Path(out, "outputs-1.json").write_text("{}")
        kept = scratch.KeptDir("outputs")
        shutil.copytree(out, kept.name, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".owner"))
    other = "from recompile_fix.profile import scratch; print(scratch.sweep())"
    swept = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, check=True)
    assert Path(kept.name).name not in swept.stdout and Path(kept.name, "outputs-1.json").exists()
    kept.cleanup()
    assert not Path(kept.name).exists()
