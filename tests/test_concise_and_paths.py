"""As ruff: one line a finding on a terminal (`concise`), the notes with `full` (`text` is its old
name, and what a pipe gets); a named file that is not Python is one warning line and skipped;
`apply` with no PATHS applies `.`. On the two-file project's recorded Profile: no program runs."""

import os
import pty
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

CASE = ROOT / "golden" / "RF003" / "seed_lr_scheduler"  # its finding (unsafe: --unsafe-fixes) has a note


@pytest.fixture
def lr_project(tmp_path):
    shutil.copy(CASE / "program.in.py", tmp_path / "program.py")
    (tmp_path / ".recompile-fix").mkdir()
    shutil.copy(CASE / "profile.json", tmp_path / ".recompile-fix" / "profile.json")
    return tmp_path


def _finding_lines(stdout):
    return [line for line in stdout.splitlines() if ": RF" in line]


def test_concise_is_one_line_a_finding_and_full_adds_the_notes(lr_project):
    concise = run_cli("apply", ".", "--check", "--unsafe-fixes", "--output-format", "concise", cwd=lr_project, check=1)
    full = run_cli("apply", ".", "--check", "--unsafe-fixes", "--output-format", "full", cwd=lr_project, check=1)
    text = run_cli("apply", ".", "--check", "--unsafe-fixes", "--output-format", "text", cwd=lr_project, check=1)
    piped = run_cli(
        "apply", ".", "--check", "--unsafe-fixes", cwd=lr_project, check=1
    )  # not a terminal: full, as before
    lines = concise.stdout.splitlines()
    assert len(lines) == 1 and lines == _finding_lines(full.stdout)
    assert lines[0].startswith("program.py:4:7: RF003 [*] ")
    assert "    note: float64 keeps" in full.stdout and "note:" not in concise.stdout
    assert text.stdout == full.stdout == piped.stdout
    assert concise.stderr == full.stderr  # the summary and the accounting, in both


def test_concise_is_the_default_on_a_terminal(lr_project):
    leader, follower = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "recompile_fix", "apply", ".", "--check", "--unsafe-fixes"],
        cwd=lr_project,
        stdout=follower,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
        text=True,
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed once its last writer did
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert done.returncode == 1, done.stderr
    lines = out.decode().replace("\r\n", "\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("program.py:4:7: RF003 [*] ")
    assert "note:" not in out.decode()


def test_report_lists_the_fixes_concise_or_full(lr_project):
    concise = run_cli("report", "--output-format", "concise", cwd=lr_project, check=0).stdout
    full = run_cli("report", cwd=lr_project, check=0).stdout  # not a terminal: full
    assert "    note: float64 keeps" in full and "note:" not in concise
    assert _finding_lines(concise) == _finding_lines(full)
    # The tensor lr, and the fallback `fix` tries where that one is not kept.
    tensor_lr, fallback = _finding_lines(concise)
    assert "float64 tensor" in tensor_lr and fallback.endswith("compile the step with `dynamic=True`")


def test_pre_commit_hooks_are_concise():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    entries = [line.split(": ", 1)[1] for line in text.splitlines() if line.strip().startswith("entry:")]
    assert entries == [
        "recompile-fix apply --check --output-format concise",
        "recompile-fix apply --output-format concise",
    ]


def test_a_named_file_that_is_not_python_is_one_warning(project):
    (project / "notes.txt").write_text("fn(torch.ones(n))\n")
    (project / "data.json").write_text("{}\n")
    alone = run_cli("apply", "notes.txt", "--check", cwd=project, check=0)
    assert alone.stdout == ""
    assert alone.stderr.splitlines()[0] == "recompile-fix: warning: notes.txt: not a Python file; skipped"
    assert "Would fix 0 finding(s)" in alone.stderr
    # Beside a Python file: its findings and exit status are as if the other were not named.
    both = run_cli("apply", "data.json", "main.py", "--check", cwd=project, check=1)
    only = run_cli("apply", "main.py", "--check", cwd=project, check=1)
    assert both.stdout == only.stdout and len(_finding_lines(both.stdout)) == 1
    warnings = [line for line in both.stderr.splitlines() if "warning" in line]
    assert warnings == ["recompile-fix: warning: data.json: not a Python file; skipped"]
    assert both.stderr.splitlines()[1:] == only.stderr.splitlines()
    # Nothing written for a skipped file, and a missing path is still an error.
    assert (project / "notes.txt").read_text() == "fn(torch.ones(n))\n"
    missing = run_cli("apply", "nope.py", "--check", cwd=project, check=2)
    assert missing.stderr.count("\n") == 1 and "nope.py: no such file or directory" in missing.stderr


def test_a_folder_walk_does_not_warn_of_other_files(project):
    (project / "notes.txt").write_text("not python\n")
    result = run_cli("apply", ".", "--check", cwd=project, check=1)
    assert "warning" not in result.stderr


def test_apply_without_paths_is_the_current_folder(project):
    bare = run_cli("apply", "--check", "--output-format", "json", cwd=project, check=1)
    dot = run_cli("apply", ".", "--check", "--output-format", "json", cwd=project, check=1)
    assert bare.stdout == dot.stdout and bare.stdout.count('"code": "RF001"') == 2
    run_cli("apply", cwd=project, check=0)
    assert "torch._dynamo.mark_dynamic" in (project / "main.py").read_text() + (project / "helpers.py").read_text()
    assert run_cli("apply", "--check", cwd=project, check=0).stdout == ""


def test_is_source_is_the_one_test():
    from recompile_fix.pipeline.paths import is_source, skipped_sources

    assert is_source("a/b.py") and not is_source("notes.txt") and is_source("nb.ipynb")  # tests/test_notebooks.py
    assert skipped_sources([str(ROOT / "README.md"), str(ROOT / "recompile_fix"), "absent.txt"]) == [
        str(ROOT / "README.md")
    ]
