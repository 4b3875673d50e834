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

from conftest import HELPERS, MAIN, ROOT, run_cli
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


def _venv_project(project: Path, main: str, helpers: str) -> Path:
    """The two-file project at ``project`` with its helper in ``pkg/`` and its virtualenv inside
    it, at ``.venv`` (this interpreter's environment, linked: its files lie under the project's
    path)."""
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    (project / "main.py").write_text(main.replace("from helpers import", "from pkg.helpers import"))
    (project / "pkg" / "helpers.py").write_text(helpers)
    os.symlink(Path(sys.prefix).resolve(), project / ".venv", target_is_directory=True)
    return project


VENV_PYTHON = str(Path(".venv", "bin", Path(sys.executable).name))


@pytest.fixture
def venv_inside(tmp_path):
    """The two-file project with its virtualenv inside it, profiled with ``.venv/bin/python``."""
    project = _venv_project(tmp_path / "proj", MAIN, HELPERS)
    run_cli("profile", "--backend", "eager", "--", VENV_PYTHON, "main.py", cwd=project, check=0)
    return project


@pytest.mark.slow
def test_apply_verify_and_fix_with_the_venv_inside_the_project(venv_inside):
    profile = json.loads((venv_inside / ".recompile-fix" / "profile.json").read_text())
    assert profile["interpreter"]["prefix"] == ".venv"
    assert sorted(profile["sources"]) == ["main.py", "pkg/helpers.py"], profile["sources"]
    checked = run_cli("apply", ".", "--verify", "--check", cwd=venv_inside)
    assert checked.returncode == 1 and "outside the project" not in checked.stderr, checked.stderr
    fixed = run_cli("fix", "--backend", "eager", "--", VENV_PYTHON, "main.py", cwd=venv_inside)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "mark_dynamic(x, 0)" in (venv_inside / "main.py").read_text()
    assert "mark_dynamic(y, 0)" in (venv_inside / "pkg" / "helpers.py").read_text()


def _compiles(profile: Path) -> dict[str, int]:
    return {f["name"]: len(f["compiles"]) for f in json.loads(profile.read_text())["frames"]}


@pytest.mark.slow
def test_a_profiled_project_with_its_venv_inside_survives_edits_and_black(venv_inside, tmp_path):
    """The issue's Done-when: profiled once with .venv/bin/python, then a docstring, comments, a
    new function and black over both files. `apply --check` from the root and from the subfolder
    that holds the call exits 1 with the fix, `verify` (on a copy) verifies both, `apply` writes
    each at its new place, the program then compiles as the hand fix does, and `fix` exits 0."""
    assert len(list((venv_inside / ".recompile-fix" / "sources").iterdir())) == 2
    main, helpers = venv_inside / "main.py", venv_inside / "pkg" / "helpers.py"
    main.write_text(
        '"""The script."""\n# a comment\n'
        + main.read_text().replace("run()\n", "run()\n\n\ndef later():\n  pass\n").replace("(3, 4, 5)", "(3,4,5)")
    )
    helpers.write_text('"""Helpers."""\n# the helpers\n' + HELPERS.replace("(n, 2)", "(n,2)"))
    done = subprocess.run([sys.executable, "-m", "black", "-q", str(main), str(helpers)])
    assert done.returncode == 0
    call = main.read_text().splitlines().index("    fn(torch.ones(n))") + 1
    inner = helpers.read_text().splitlines().index("        gn(y)") + 1
    assert (call, inner) != (12, 12)  # both moved

    checked = run_cli("apply", ".", "--check", cwd=venv_inside, check=1)
    assert f"main.py:{call}:5: RF001" in checked.stdout and f"pkg/helpers.py:{inner}:9: RF001" in checked.stdout
    assert "stale" not in checked.stderr, checked.stderr
    sub = run_cli("apply", ".", "--check", cwd=venv_inside / "pkg", check=1)
    assert f"pkg/helpers.py:{inner}:9: RF001" in sub.stdout and "Would fix 1 finding(s)" in sub.stderr

    verified = run_cli("verify", cwd=venv_inside)  # the Profile's command: .venv/bin/python main.py
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "outside the project" not in verified.stderr and "stale" not in verified.stderr, verified.stderr
    assert "Verified" in verified.stdout and "RF001" in verified.stdout

    run_cli("apply", ".", cwd=venv_inside, check=0)
    assert main.read_text().splitlines()[call - 1 : call + 2] == [
        "    x = torch.ones(n)",
        "    torch._dynamo.mark_dynamic(x, 0)",
        "    fn(x)",
    ]
    assert helpers.read_text().splitlines()[inner - 2 : inner + 1] == [
        "        y = torch.ones(n, 2)",
        "        torch._dynamo.mark_dynamic(y, 0)",
        "        gn(y)",
    ]

    hand = _venv_project(
        tmp_path / "hand",
        MAIN.replace("    fn(torch.ones(n))", "    x = torch.ones(n)\n    torch._dynamo.mark_dynamic(x, 0)\n    fn(x)"),
        HELPERS.replace("        gn(y)", "        torch._dynamo.mark_dynamic(y, 0)\n        gn(y)"),
    )
    for where in (venv_inside, hand):
        run_cli(
            "profile",
            "--backend",
            "eager",
            "-o",
            tmp_path / f"{where.name}.json",
            "--",
            VENV_PYTHON,
            "main.py",
            cwd=where,
            check=0,
        )
    assert _compiles(tmp_path / "proj.json") == _compiles(tmp_path / "hand.json") == {"fn": 1, "gn": 1}

    fixed = run_cli("fix", "--backend", "eager", "--", VENV_PYTHON, "main.py", cwd=venv_inside)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


@pytest.mark.parametrize("layout", [".venv", "venv", "env", "conda"])
def test_verify_and_fix_link_an_environment_inside_the_project(tmp_path, layout):
    """The copy `verify`, `fix` and `apply --verify` run in links the program's environment, as
    it is laid out inside the project (python -m venv at any name, a conda prefix), never copies
    it: a command like `.venv/bin/python main.py` runs the same interpreter from the copy."""
    from recompile_fix.verify.tree import Checkout, through_links

    project = tmp_path / "proj"
    name = "envs/dev" if layout == "conda" else layout
    environment = project / name
    (environment / "bin").mkdir(parents=True)
    if layout == "conda":
        (environment / "conda-meta").mkdir()
    else:
        (environment / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (environment / "bin" / "python").write_text("#!/bin/sh\n")
    (project / "pyproject.toml").write_text("")
    (project / "main.py").write_text("x = 1\n")
    work = Checkout.of(project).copy_to(tmp_path / "copy")
    linked = work.root / name
    assert linked.is_symlink() and linked.resolve() == environment.resolve()
    assert (work.root / "main.py").read_text() == "x = 1\n" and not (work.root / "main.py").is_symlink()
    # The copy runs the environment's interpreter by the project's own path (one warm server for
    # every copy, and sys.prefix as in the profile run); a script of the copy stays the copy's.
    interpreter = str(Path(name, "bin", "python"))
    assert through_links([interpreter, "main.py"], project, work.cwd) == [str(project / interpreter), "main.py"]
    assert through_links(["python", "main.py"], project, work.cwd) == ["python", "main.py"]
    (project / "tools").mkdir()
    assert through_links(["tools/run.sh"], project, work.cwd) == ["tools/run.sh"]


def test_a_project_named_below_the_current_folder_uses_its_own_profile(tmp_path):
    """`apply rl` from a folder above a project profiled in `rl/`, with another Profile further
    up (a trial): the findings are `rl`'s own Profile's, not the one above."""
    outer_case = ROOT / "golden" / "RF003" / "seed_lr_scheduler"
    inner_case = ROOT / "golden" / "RF002" / "range_count"
    (tmp_path / ".recompile-fix").mkdir()
    shutil.copy(outer_case / "profile.json", tmp_path / ".recompile-fix" / "profile.json")
    shutil.copy(outer_case / "program.in.py", tmp_path / "program.py")
    work = tmp_path / "work"
    inner = work / "rl"
    (inner / ".recompile-fix").mkdir(parents=True)
    shutil.copy(inner_case / "profile.json", inner / ".recompile-fix" / "profile.json")
    shutil.copy(inner_case / "program.in.py", inner / "program.py")
    done = run_cli("apply", "rl", "--check", "--output-format", "concise", cwd=work, check=0)
    assert "RF002" in done.stdout and "RF003" not in done.stdout, done.stdout + done.stderr
