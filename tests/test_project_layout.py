"""A project as people lay it out: commands run from a subfolder find the project's Profile and
[tool.recompile-fix] upward, as ruff finds its configuration; the program's virtualenv may live
inside the project (.venv), and `verify`, `apply --verify` and `fix` still run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HELPERS, MAIN, TWO_FILES, run_cli
from recompile_fix.config import find_project_root


@pytest.fixture
def nested(project):
    """The two-file project with its helper module in a package folder, ``pkg/helpers.py``
    (the Profile spells it so: the same bytes, so the same hash)."""
    (project / "pkg").mkdir()
    shutil.move(project / "helpers.py", project / "pkg" / "helpers.py")
    (project / "docs").mkdir()
    path = project / ".recompile-fix" / "profile.json"
    path.write_text(path.read_text().replace('"helpers.py"', '"pkg/helpers.py"'))
    assert '"pkg/helpers.py"' in path.read_text()
    return project


def test_the_profile_is_found_from_a_subfolder(nested):
    assert find_project_root(nested / "pkg") == nested.resolve()
    assert find_project_root(nested) == nested.resolve()
    assert find_project_root(nested.parent) is None


def test_apply_dot_in_a_subfolder_applies_the_findings_under_it(nested):
    check = run_cli("apply", ".", "--check", cwd=nested / "pkg", check=1)
    assert "pkg/helpers.py:" in check.stdout and "main.py:" not in check.stdout.replace("pkg/", "")
    assert "Would fix 1 finding(s) in 1 file(s)." in check.stderr
    run_cli("apply", ".", cwd=nested / "pkg", check=0)
    assert "torch._dynamo.mark_dynamic(y, 0)" in (nested / "pkg" / "helpers.py").read_text()
    assert (nested / "main.py").read_text() == MAIN  # not under the folder it ran in
    again = run_cli("apply", ".", "--check", cwd=nested / "pkg", check=0)
    assert "Would fix 0" in again.stderr


def test_a_subfolder_without_findings_says_where_they_are(nested):
    result = run_cli("apply", ".", "--check", cwd=nested / "docs", check=0)
    assert "no Profile" not in result.stderr  # found, not static mode
    assert "2 more finding(s) outside docs (not changed)" in result.stderr
    whole = run_cli("apply", "..", "--check", cwd=nested / "docs", check=1)
    assert "Would fix 2 finding(s) in 2 file(s)." in whole.stderr


def test_report_from_a_subfolder(nested):
    result = run_cli("report", cwd=nested / "pkg", check=0)
    assert "gn (pkg/helpers.py:4)" in result.stdout


def test_the_configured_profile_is_found_from_a_subfolder(nested):
    (nested / "ci").mkdir()
    shutil.move(nested / ".recompile-fix" / "profile.json", nested / "ci" / "profile.json")
    (nested / "pyproject.toml").write_text('[tool.recompile-fix]\nprofile = "ci/profile.json"\n')
    result = run_cli("apply", ".", "--check", cwd=nested / "pkg", check=1)
    assert "pkg/helpers.py:" in result.stdout and "RF001" in result.stdout


@pytest.fixture
def venv_inside(tmp_path):
    """The two-file project with its virtualenv inside it, at ``.venv`` (this interpreter's
    environment, linked: its files lie under the project's path), profiled with
    ``.venv/bin/python``."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    shutil.copy(TWO_FILES / "main.py", project / "main.py")
    shutil.copy(TWO_FILES / "helpers.py", project / "helpers.py")
    os.symlink(Path(sys.prefix).resolve(), project / ".venv", target_is_directory=True)
    python = Path(".venv", "bin", Path(sys.executable).name)
    run_cli("profile", "--backend", "eager", "--", str(python), "main.py", cwd=project, check=0)
    return project


@pytest.mark.slow
def test_verify_apply_verify_and_fix_with_the_venv_inside_the_project(venv_inside):
    profile = json.loads((venv_inside / ".recompile-fix" / "profile.json").read_text())
    assert profile["interpreter"]["prefix"] == ".venv"
    assert all(not p.startswith(".venv") for p in profile["sources"]), profile["sources"]
    verified = run_cli("verify", cwd=venv_inside)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "outside the project" not in verified.stderr and "Verified" in verified.stdout
    checked = run_cli("apply", ".", "--verify", "--check", cwd=venv_inside)
    assert checked.returncode == 1 and "outside the project" not in checked.stderr, checked.stderr
    fixed = run_cli("fix", "--backend", "eager", "--", str(Path(".venv", "bin", "python")), "main.py", cwd=venv_inside)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "mark_dynamic(x, 0)" in (venv_inside / "main.py").read_text()
    assert "mark_dynamic(y, 0)" in (venv_inside / "helpers.py").read_text()
    assert HELPERS != (venv_inside / "helpers.py").read_text()


@pytest.mark.slow
def test_a_profiled_project_with_its_venv_inside_survives_edits_and_black(venv_inside):
    """Profiled once with .venv/bin/python, then a docstring, a comment, a new function and
    black over both files: both findings still apply, each at its new place."""
    assert len(list((venv_inside / ".recompile-fix" / "sources").iterdir())) == 2
    main, helpers = venv_inside / "main.py", venv_inside / "helpers.py"
    main.write_text('"""The script."""\n# a comment\n' + MAIN.replace("run()\n", "run()\n\n\ndef later():\n  pass\n"))
    helpers.write_text('"""Helpers."""\n' + HELPERS.replace("(n, 2)", "(n,2)"))
    done = subprocess.run([sys.executable, "-m", "black", "-q", str(main), str(helpers)])
    assert done.returncode == 0
    checked = run_cli("apply", ".", "--check", cwd=venv_inside, check=1)
    assert checked.stdout.count("RF001") == 2 and "stale" not in checked.stderr, checked.stderr
    run_cli("apply", ".", cwd=venv_inside, check=0)
    assert "torch._dynamo.mark_dynamic(x, 0)\n    fn(x)" in main.read_text()
    assert "torch._dynamo.mark_dynamic(y, 0)\n        gn(y)" in helpers.read_text()
