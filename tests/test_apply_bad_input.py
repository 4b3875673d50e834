"""Bad input to `apply`: one clear line, exit 2, that file untouched, the other files still fixed."""

import hashlib
import json

import pytest

from conftest import HELPERS, MAIN, run_cli


def _errors(result):
    return [l for l in result.stderr.splitlines() if l.startswith("recompile-fix: error:")]


def _set_source(project, name, data: bytes):
    (project / name).write_bytes(data)
    path = project / ".recompile-fix" / "profile.json"
    profile = json.loads(path.read_text())
    profile["sources"][name] = hashlib.sha256(data).hexdigest()
    path.write_text(json.dumps(profile))


def test_clean_project_fixes_both_files(project):
    result = run_cli("apply", ".", cwd=project, check=0)
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()
    assert "        torch._dynamo.mark_dynamic(y, 0)\n        gn(y)" in (project / "helpers.py").read_text()
    assert _errors(result) == []


@pytest.mark.parametrize(
    "bad, message",
    [
        (HELPERS.replace("def run():", "def run(:").encode(), "does not parse"),
        (HELPERS.encode() + b"# caf\xe9\n", "not UTF-8"),
    ],
)
def test_unparsable_or_non_utf8_file(project, bad, message):
    _set_source(project, "helpers.py", bad)
    result = run_cli("apply", ".", cwd=project, check=2)
    (error,) = _errors(result)
    assert error.startswith("recompile-fix: error: ") and "helpers.py" in error and message in error
    assert (project / "helpers.py").read_bytes() == bad
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()


def test_file_outside_paths_is_context_not_an_error(project):
    result = run_cli("apply", "main.py", cwd=project, check=0)
    assert _errors(result) == []
    assert "1 more finding(s) outside main.py (not changed): helpers.py." in result.stderr
    assert (project / "helpers.py").read_text() == HELPERS
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()
    assert run_cli("apply", "main.py", "--check", cwd=project, check=0).stdout == ""  # only PATHS count


def test_checkout_without_the_profiled_virtualenv(project):
    """CI: the Profile names torch's files in a virtualenv under the project (.venv/...), which
    a fresh checkout does not have: context, never an error; the user's files are fixed."""
    path = project / ".recompile-fix" / "profile.json"
    profile = json.loads(path.read_text())
    helpers = next(f for f in profile["frames"] if f["file"] == "helpers.py")
    venv_file = ".venv/lib/python3.11/site-packages/torch/optim/adam.py"
    profile["frames"].append({**helpers, "file": venv_file})  # a recompiling frame in torch's own file
    profile["sources"][venv_file] = "0" * 64
    path.write_text(json.dumps(profile))
    result = run_cli("apply", ".", "--diff", cwd=project, check=1)
    assert _errors(result) == [], result.stderr
    assert "mark_dynamic(x, 0)" in result.stdout and "mark_dynamic(y, 0)" in result.stdout
    assert "adam.py" not in result.stdout


def test_missing_file_is_one_line_naming_it(project):
    (project / "helpers.py").unlink()
    result = run_cli("apply", ".", cwd=project, check=2)
    (error,) = _errors(result)
    assert error == (
        "recompile-fix: error: helpers.py: no such file, but the Profile names it (moved or deleted since "
        "profiling?); not changed"
    )
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()


def test_stale_profile(project):
    (project / "helpers.py").write_text(HELPERS + "# edited after profiling\n")
    result = run_cli("apply", ".", cwd=project, check=2)
    (error,) = _errors(result)
    assert "helpers.py: changed since it was profiled" in error
    assert (project / "helpers.py").read_text() == HELPERS + "# edited after profiling\n"
    assert "mark_dynamic(x, 0)" in (project / "main.py").read_text()


def test_truncated_profile_writes_nothing(project):
    path = project / ".recompile-fix" / "profile.json"
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
    result = run_cli("apply", ".", cwd=project, check=2)
    assert len(result.stderr.strip().splitlines()) == 1 and "truncated" in result.stderr
    assert (project / "main.py").read_text() == MAIN and (project / "helpers.py").read_text() == HELPERS


def test_foreign_profile(project):
    path = project / ".recompile-fix" / "profile.json"
    path.write_text(json.dumps({"schema": "something-else"}))
    result = run_cli("apply", ".", cwd=project, check=2)
    assert "not a recompile-fix Profile" in result.stderr
    assert (project / "main.py").read_text() == MAIN


def test_path_outside_project(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_cli("apply", str(elsewhere), cwd=project, check=2)
    (error,) = _errors(result)
    assert "outside the project" in error


def test_diff_and_check_write_nothing_and_exit_1_while_fixes_are_pending(project):
    # As ruff: `--diff` and `--check` fail while fixes are pending; `--exit-zero` keeps 0.
    diff = run_cli("apply", ".", "--diff", cwd=project, check=1)
    assert diff.stdout.startswith("--- a/") and "+    torch._dynamo.mark_dynamic(" in diff.stdout
    assert run_cli("apply", ".", "--diff", "--exit-zero", cwd=project, check=0).stdout == diff.stdout
    check = run_cli("apply", ".", "--check", cwd=project, check=1)
    assert "RF001" in check.stdout
    run_cli("apply", ".", "--check", "--exit-zero", cwd=project, check=0)
    assert (project / "main.py").read_text() == MAIN
    run_cli("apply", ".", cwd=project, check=0)
    assert run_cli("apply", ".", "--check", cwd=project, check=0).returncode == 0
    assert run_cli("apply", ".", "--diff", cwd=project, check=0).stdout == ""
