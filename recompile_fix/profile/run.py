"""`recompile-fix profile`: run the user's command with the recorder in every Python process it
starts, and hand the raw records to ``merge`` (one Profile).

The recorder enters through ``PYTHONPATH`` (a ``sitecustomize`` in a private directory), so
``python script.py``, ``python -m pkg``, a bare ``script.py`` and launchers that start more
Python processes (torchrun) all work without touching the user's code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import recompile_fix
from recompile_fix.errors import UserError
from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.model import Profile
from recompile_fix.profile.recorder import BACKEND_ENV, PARTS_DIR_ENV

__all__ = ["resolve_command", "run_profiled"]

_PACKAGE_DIR = Path(recompile_fix.__file__).resolve().parent


def resolve_command(command: list[str]) -> list[str]:
    if not command:
        raise UserError("no command given: use `recompile-fix profile -- python train.py ...`")
    program = command[0]
    if re.fullmatch(r"python(3(\.\d+)?)?", program):
        # `python` means the interpreter recompile-fix runs under: the one whose torch it knows.
        return [sys.executable, *command[1:]]
    if program.endswith(".py") and os.path.isfile(program) and not os.access(program, os.X_OK):
        return [sys.executable, *command]
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise UserError(f"command not found: {program}")
        return list(command)
    if program.endswith(".py") and os.path.isfile(program):
        return [sys.executable, *command]
    if shutil.which(program) is None:
        # A launcher installed beside our interpreter (torchrun in an unactivated venv).
        beside = os.path.join(os.path.dirname(sys.executable), program)
        if os.path.isfile(beside) and os.access(beside, os.X_OK):
            return [beside, *command[1:]]
        raise UserError(f"command not found: {program}")
    return list(command)


def _bootstrap_dir(workdir: Path) -> Path:
    """A directory holding only our sitecustomize and the recompile_fix package."""
    boot = workdir / "boot"
    boot.mkdir()
    shutil.copy(_PACKAGE_DIR / "_bootstrap" / "sitecustomize.py", boot / "sitecustomize.py")
    (boot / "recompile_fix").symlink_to(_PACKAGE_DIR, target_is_directory=True)
    return boot


def run_profiled(
    command: list[str],
    *,
    backend: str | None = None,
    root: str | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    output=None,
) -> tuple[Profile, int]:
    """Run ``command`` with the recorder; return its Profile and exit code.

    ``cwd``: where the command runs (default: here); paths in the Profile are relative to
    ``root`` (default: ``cwd``). ``env``: extra environment variables. ``output``: a file the
    program's stdout and stderr go to (default: ours)."""
    argv = resolve_command(command)
    root = os.path.abspath(root or cwd or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="recompile-fix-") as tmp:
        workdir = Path(tmp)
        boot = _bootstrap_dir(workdir)
        parts = workdir / "parts"
        env = {**os.environ, **(env or {})}
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(boot), env.get("PYTHONPATH", "")] if p)
        env[PARTS_DIR_ENV] = str(parts)
        if backend:
            env[BACKEND_ENV] = backend
        else:
            env.pop(BACKEND_ENV, None)
        # The child shares our terminal: Ctrl-C reaches it directly; we wait for its Profile.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            completed = subprocess.run(argv, env=env, cwd=cwd, stdout=output, stderr=output)
        except OSError as exc:
            raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
        finally:
            signal.signal(signal.SIGINT, previous)
        code = completed.returncode
        exit_code = code if code >= 0 else 128 - code
        records = _read_parts(parts)
    profile = build_profile(records, command=list(command), root=root)
    profile.exit_code = exit_code
    profile.backend = backend
    return profile, exit_code


def _read_parts(parts: Path) -> list[dict]:
    records = []
    if parts.is_dir():
        for path in sorted(parts.glob("part-*.json")):
            try:
                records.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError):
                continue  # a process killed mid-write leaves nothing usable
    return records
