"""Issue 30, cause 8: static mode's torch release is the user's interpreter's (the first
``python`` on PATH, which ``profile`` would run), asked without importing torch, cached per
interpreter under ``.recompile-fix/cache/``; when it cannot be asked, this tool's own, said once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recompile_fix.findings import releases
from recompile_fix.findings.releases import TORCH_VERSIONS_CACHE, installed_torch_version, user_torch_version

ROOT = Path(__file__).resolve().parent.parent


def _fake_python(bin_dir: Path, calls: Path, body: str) -> Path:
    """A ``python`` that logs each call to ``calls`` and then runs ``body`` (shell)."""
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\necho call >> "{calls}"\n{body}\n')
    python.chmod(0o755)
    return python


@pytest.fixture
def second_venv(tmp_path, monkeypatch):
    """A second environment's ``python`` first on PATH, whose torch is 2.6.0."""
    calls = tmp_path / "calls"
    _fake_python(tmp_path / "bin", calls, """echo '{"torch": "2.6.0", "path": []}'""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    _forget()
    yield calls
    _forget()


def _forget() -> None:
    """A new process: nothing asked yet (the cache under the project stays)."""
    releases.asked_torch_version.cache_clear()
    releases._ASKED.clear()
    releases._SAID.clear()


def test_static_mode_asks_the_interpreter_on_path(tmp_path, second_venv):
    project = tmp_path / "project"
    project.mkdir()
    assert installed_torch_version(project) == "2.6.0"
    assert second_venv.read_text().count("\n") == 1
    cached = json.loads((project / TORCH_VERSIONS_CACHE).read_text())
    assert [entry["torch"] for entry in cached.values()] == ["2.6.0"]
    # Another process over the same project: from the cache, the interpreter is not asked again.
    _forget()
    assert installed_torch_version(project) == "2.6.0"
    assert second_venv.read_text().count("\n") == 1
    # The rules' call (no root) in the same process: what the process was told.
    assert installed_torch_version() == "2.6.0"
    assert second_venv.read_text().count("\n") == 1
    # The interpreter changed (a new mtime): asked again.
    python = tmp_path / "bin" / "python"
    os.utime(python, ns=(python.stat().st_atime_ns, python.stat().st_mtime_ns + 10**9))
    assert user_torch_version(project).version == "2.6.0"
    assert second_venv.read_text().count("\n") == 2


def test_the_tool_never_imports_torch_to_know_the_version(tmp_path, second_venv):
    probe = (
        "import sys; from recompile_fix.findings.releases import installed_torch_version as v; "
        "print(v(sys.argv[1])); print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == ["2.6.0", "False"]
    assert done.stderr == ""


def test_static_apply_gates_on_the_users_torch(tmp_path, second_venv, cli):
    """RF004 writes torch.compiler.nested_compile_region, which torch 2.6 lacks: the user's
    interpreter says 2.6.0, so static mode makes no such edit, though this tool's own torch
    (2.13) has it (tests/test_releases.py: there it is written)."""
    program = tmp_path / "program.py"
    program.write_bytes((ROOT / "golden" / "RF004" / "deep_blocks_module" / "program.in.py").read_bytes())
    env = {"PATH": os.environ["PATH"]}
    diff = cli("apply", "--diff", "--unsafe-fixes", "program.py", cwd=tmp_path, env=env)
    assert "nested_compile_region" not in diff.stdout, diff.stdout
    found = json.loads(cli("apply", "--output-format", "json", "program.py", cwd=tmp_path, env=env).stdout)
    (rf004,) = [f for f in found if f["code"] == "RF004"]
    assert rf004["fix"] is None
    assert second_venv.read_text().count("\n") == 1  # asked once: the second process reads the cache
    cached = json.loads((tmp_path / TORCH_VERSIONS_CACHE).read_text())
    assert [entry["torch"] for entry in cached.values()] == ["2.6.0"]


@pytest.mark.parametrize(
    "body, why",
    [
        ("exit 1", "did not say its torch version (exit 1)"),
        ("echo not json", "did not say its torch version (exit 0)"),
        ("""echo '{"torch": null, "path": []}'""", "has no torch"),
    ],
    ids=["fails", "garbage", "no-torch"],
)
def test_an_interpreter_that_cannot_say_falls_back_to_the_tools_torch(tmp_path, monkeypatch, capsys, body, why):
    _fake_python(tmp_path / "bin", tmp_path / "calls", body)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    _forget()
    try:
        assert installed_torch_version(tmp_path) == releases._own_torch_version()
        installed_torch_version(tmp_path)  # once per process: one line
        installed_torch_version()  # the rules' call, without a root
    finally:
        _forget()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err and "static mode uses this tool's own torch" in err, err


def test_a_slow_interpreter_is_given_up_on(tmp_path, monkeypatch):
    _fake_python(tmp_path / "bin", tmp_path / "calls", "sleep 5")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(releases, "ASK_TIMEOUT_S", 0.5)
    asked = user_torch_version(tmp_path)
    assert not asked.ok and "within 0.5 s" in asked.why


def test_the_tools_own_interpreter_is_not_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    asked = user_torch_version(tmp_path)
    assert asked.ok and asked.version == releases._own_torch_version()
    assert not (tmp_path / TORCH_VERSIONS_CACHE).exists()  # answered in-process: nothing to cache


def test_with_a_profile_the_runs_torch_is_used_and_path_is_not_asked(tmp_path):
    """A Profile names the torch the tree runs on: `report` and `apply` use it, and never ask (or
    complain about) a `python` on PATH that has no torch (a pyenv shim outside the venv)."""
    case = ROOT / "golden" / "RF002" / "range_count"
    project = tmp_path / "project"
    (project / ".recompile-fix").mkdir(parents=True)
    (project / "program.py").write_bytes((case / "program.in.py").read_bytes())
    (project / ".recompile-fix" / "profile.json").write_bytes((case / "profile.json").read_bytes())
    calls = tmp_path / "calls"
    _fake_python(tmp_path / "bin", calls, """echo '{"torch": null, "path": []}'""")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    for command in (["report"], ["apply", ".", "--diff"]):
        done = subprocess.run(
            [sys.executable, "-m", "recompile_fix", *command], cwd=project, capture_output=True, text=True, env=env
        )
        assert done.returncode in (0, 1) and "static mode" not in done.stderr, done.stderr
        assert command != ["report"] or "RF002" in done.stdout
    assert not calls.exists()
