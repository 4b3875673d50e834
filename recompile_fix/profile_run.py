"""`recompile-fix profile`: run the user's command with the recorder in every Python process it
starts, then type and merge the raw records into one Profile.

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
from collections import Counter
from pathlib import Path

import recompile_fix
from recompile_fix.errors import UserError
from recompile_fix.profile import (
    Compile,
    Frame,
    GraphBreak,
    Location,
    Profile,
    relative_to_root,
    sha256_file,
)
from recompile_fix.reasons import is_limit_hit, limit_hit_reason, parse_reason, parse_reasons
from recompile_fix.recorder import BACKEND_ENV, PARTS_DIR_ENV

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


def _location(raw: dict, root: str) -> Location:
    return Location(
        file=relative_to_root(raw["file"], root),
        line=raw["line"],
        end_line=raw.get("end_line"),
        col=raw.get("col"),
        end_col=raw.get("end_col"),
        function=raw.get("function"),
    )


def build_profile(records: list[dict], *, command: list[str], root: str) -> Profile:
    """Type and merge the recorder's raw records (one per process) into a Profile."""
    import platform

    torch_version = next((r.get("torch_version") for r in records if r.get("torch_version")), None)
    profile = Profile(
        command=command,
        torch_version=torch_version,
        python_version=platform.python_version(),
        tool_version=recompile_fix.__version__,
    )
    frames: dict[tuple, Frame] = {}
    named: set[str] = set()
    ranked = sorted(records, key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r.get("pid", 0)))
    any_rank = any(r.get("rank") is not None for r in records)
    for record in ranked:
        rank = record.get("rank")
        if any_rank and rank is None and not record.get("compiles") and not record.get("graph_breaks"):
            continue  # the launcher (torchrun imports torch too): it compiled nothing
        profile.processes.append(
            {
                "pid": record.get("pid"),
                "rank": rank,
                "exit": record.get("exit", {}).get("status"),
                "exception": record.get("exit", {}).get("exception"),
                "compiles": len(record.get("compiles", [])),
            }
        )
        frame_of_id: dict[str, Frame] = {}
        compile_of_id: dict[str, Compile] = {}
        for raw in record.get("compiles", []):
            compile_id = raw["compile_id"]
            frame_id = compile_id.rsplit("/", 1)[0]
            frame = None
            if raw.get("frame"):
                f = raw["frame"]
                key = (relative_to_root(f["file"], root), f["line"], f["name"])
                frame = frames.get(key)
                if frame is None:
                    frame = frames[key] = Frame(file=key[0], first_line=key[1], name=key[2])
                    named.add(f["file"])
            frame = frame or frame_of_id.get(frame_id)
            if frame is None:
                continue  # a failure before torch named the frame: nothing to attach it to
            frame_of_id[frame_id] = frame
            existing = compile_of_id.get(compile_id)
            if existing is not None:  # a later record of the same compile (e.g. lazy backward)
                _add_seconds(existing, raw.get("seconds", {}))
                continue
            compile_ = Compile(
                id=compile_id,
                rank=rank,
                seconds=dict(raw.get("seconds", {})),
                inputs=dict(raw.get("inputs", {})),
                fail_type=raw.get("fail_type"),
            )
            texts = raw.get("guard_failures") or ([raw["recompile_reason"]] if raw.get("recompile_reason") else [])
            for text in texts:
                compile_.reasons.extend(parse_reasons(text))
            if not compile_.reasons and raw.get("recompile_reason"):
                compile_.reasons.append(parse_reason(raw["recompile_reason"]))
            fail_reason = raw.get("fail_reason")
            if fail_reason:
                compile_.fail_reason = fail_reason.split("\n", 1)[0]
            if is_limit_hit(fail_reason):
                compile_.limit_hit = True
                compile_.reasons.insert(0, limit_hit_reason(fail_reason))
            compile_.stack = [_location(s, root) for s in raw.get("stack", [])]
            named.update(s["file"] for s in raw.get("stack", []))
            for reason in compile_.reasons:
                if reason.first_use is not None:
                    named.add(reason.first_use.file)
                    reason.first_use = Location(
                        **{**reason.first_use.__dict__, "file": relative_to_root(reason.first_use.file, root)}
                    )
            frame.compiles.append(compile_)
            compile_of_id[compile_id] = compile_
        breaks: dict[tuple, tuple[Frame, Counter]] = {}
        for raw in record.get("graph_breaks", []):
            frame = frame_of_id.get((raw.get("compile_id") or "").rsplit("/", 1)[0])
            if frame is None:
                continue
            named.add(raw["file"])
            key = (relative_to_root(raw["file"], root), raw["line"], raw.get("reason", ""))
            breaks.setdefault(frame.key, (frame, Counter()))[1][key] += 1
        for frame, counts in breaks.values():
            for (file, line, reason), count in counts.items():
                same = next(
                    (
                        b
                        for b in frame.graph_breaks
                        if (b.location.file, b.location.line, b.reason) == (file, line, reason)
                    ),
                    None,
                )  # the same break on another rank
                if same is not None:
                    same.count += count
                else:
                    frame.graph_breaks.append(
                        GraphBreak(location=Location(file=file, line=line), reason=reason, count=count)
                    )
    profile.frames = sorted(frames.values(), key=lambda f: (f.file, f.first_line, f.name))
    for path in sorted(named):
        digest = sha256_file(path)
        if digest is not None:
            profile.sources[relative_to_root(path, root)] = digest
    return profile


def _add_seconds(compile_: Compile, seconds: dict) -> None:
    for key, value in seconds.items():
        if value is not None:
            compile_.seconds[key] = (compile_.seconds.get(key) or 0.0) + value
