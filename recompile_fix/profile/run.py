"""`recompile-fix profile`: run the user's command with the recorder in every Python process it
starts, and hand the raw records to ``merge`` (one Profile).

The recorder enters through ``PYTHONPATH`` (a ``sitecustomize`` in a private directory), so
``python script.py``, ``python -m pkg``, a bare ``script.py`` and launchers that start more
Python processes (torchrun) all work without touching the user's code. The command runs in the
user's environment, as a shell would run it: recompile-fix itself may be installed in an
environment of its own (pipx, ``uv tool``) without torch; what enters the user's processes
(``_bootstrap/sitecustomize.py``, ``recorder``, ``compiled_outputs``) imports only the standard
library and the user's torch.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import recompile_fix
from recompile_fix._bootstrap.watchdog import OWNER_DIRS_ENV, OWNER_ENV
from recompile_fix.errors import Interrupted, UserError
from recompile_fix.profile import scratch, warm
from recompile_fix.profile.libraries import is_python
from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.model import Profile
from recompile_fix.profile.notebook_run import prepare_notebook, rename_to_notebook
from recompile_fix.profile.recorder.install import BACKEND_ENV
from recompile_fix.profile.recorder.part_files import PARTS_DIR_ENV

__all__ = ["check_torch", "recorder_warnings", "recording_summary", "resolve_command", "run_profiled"]

_PACKAGE_DIR = Path(recompile_fix.__file__).resolve().parent


# Exit code of the probe below when the interpreter has no torch to import.
_NO_TORCH = 3


def resolve_command(command: list[str]) -> list[str]:
    """The argv to run, as a shell would find it: ``python`` is the first ``python`` on PATH (the
    user's environment, not the one recompile-fix is installed in); a bare ``script.py`` runs
    under that ``python``."""
    if not command:
        raise UserError("no command given: use `recompile-fix profile -- python train.py ...`")
    program = command[0]
    if program.endswith(".py") and os.path.isfile(program) and not os.access(program, os.X_OK):
        return [_python_on_path(), *command]
    if os.sep in program or (os.altsep and os.altsep in program):
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise UserError(f"command not found: {program}")
        return list(command)
    if program.endswith(".py") and os.path.isfile(program):
        return [_python_on_path(), *command]
    found = shutil.which(program)
    if found is None:
        # A launcher installed beside our interpreter (torchrun in an unactivated venv).
        beside = os.path.join(os.path.dirname(sys.executable), program)
        if not is_python(program) and os.path.isfile(beside) and os.access(beside, os.X_OK):
            return [beside, *command[1:]]
        if is_python(program):
            raise UserError(
                f"command not found: {program} (no `{program}` on PATH): activate the virtualenv your "
                f"program runs in, or name its interpreter: recompile-fix profile -- .venv/bin/python train.py"
            )
        raise UserError(f"command not found: {program}")
    return [found, *command[1:]]


def _python_on_path() -> str:
    found = shutil.which("python") or shutil.which("python3")
    if found is None:
        raise UserError("no `python` on PATH to run the script with: name the interpreter (-- .venv/bin/python ...)")
    return found


def check_torch(argv: list[str], env: dict[str, str] | None = None) -> None:
    """When the command starts a Python interpreter, that interpreter must be able to import torch
    (the recorder reads torch's own bookkeeping); otherwise one clear line instead of the
    program's ModuleNotFoundError. Launchers (torchrun) are not probed: their interpreter is
    their own and has torch by construction."""
    interpreter = argv[0]
    if not is_python(interpreter):
        return
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else %d)" % _NO_TORCH
    try:
        done = subprocess.run([interpreter, "-c", probe], env=env, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return  # the run itself says what is wrong with the interpreter
    if done.returncode == _NO_TORCH:
        raise UserError(
            f"{interpreter} cannot import torch: run from the environment your program runs in "
            "(activate its virtualenv, so `python` is its interpreter) or name that interpreter: "
            "recompile-fix profile -- /path/to/venv/bin/python train.py"
        )


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
    root = os.path.abspath(root or cwd or os.getcwd())
    # A notebook runs as the script of its cells, kept under the root's .recompile-fix/.
    runnable, notebook = prepare_notebook(list(command), cwd=os.path.abspath(cwd or os.getcwd()), root=root)
    argv = resolve_command(runnable)
    check_torch(argv, env={**os.environ, **(env or {})})
    with scratch.scratch_dir("run") as tmp:
        workdir = Path(tmp)
        boot = _bootstrap_dir(workdir)
        parts = workdir / "parts"
        env = {**os.environ, **(env or {})}
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(boot), env.get("PYTHONPATH", "")] if p)
        env[PARTS_DIR_ENV] = str(parts)
        # Killed (kill -9), we cannot pass a signal on: the program ends itself, and removes
        # our copies (_bootstrap.watchdog).
        env[OWNER_ENV] = str(os.getpid())
        env[OWNER_DIRS_ENV] = os.pathsep.join(scratch.owned())
        if output is not None:
            # Piped, a child's stdout is block-buffered: the progress line would show torch's
            # warnings (stderr) instead of the program's prints. The user's own setting wins.
            env.setdefault("PYTHONUNBUFFERED", "1")
        if backend:
            env[BACKEND_ENV] = backend
        else:
            env.pop(BACKEND_ENV, None)
        code, stopped_by = _run_child(argv, env=env, cwd=cwd, output=output, boot=str(boot))
        exit_code = code if code >= 0 else 128 - code
        records = _read_parts(parts)
    for line in recorder_warnings(records):
        print(f"recompile-fix: {line}", file=sys.stderr)
    profile = build_profile(records, command=list(command), root=root)
    profile.exit_code = exit_code
    profile.backend = backend
    if notebook is not None:
        profile = rename_to_notebook(profile, notebook, root)
    if stopped_by is not None:
        raise Interrupted(stopped_by, partial=profile)
    return profile, exit_code


def recorder_warnings(records: list[dict]) -> list[str]:
    """What the recorder had to repair in each process (notes), and where it recorded fewer
    compiles than torch handed out compile ids for (a warning: that Profile is incomplete)."""
    lines = []
    for record in records:
        status = record.get("recorder") or {}
        pid = record.get("pid")
        for event in status.get("events", []):
            lines.append(f"note: pid {pid}: {event}")
        features = status.get("features") or {}
        for feature, loss in _FEATURE_LOSS.items():
            if features.get(feature) is False:
                lines.append(f"note: pid {pid}: torch {status.get('torch_version')} has no {feature}: {loss}")
        if record.get("exit", {}).get("status") == _NO_ATEXIT:
            lines.append(
                f"warning: pid {pid} ended without running atexit (os._exit or a signal): its "
                f"{len(record.get('compiles', []))} compiles were read from what the recorder wrote as it went"
            )
        if status.get("complete") is False:
            lines.append(
                f"warning: pid {pid}: torch {status.get('torch_version')} handed out "
                f"{status.get('torch_compile_ids')} compile ids, the recorder saw {status.get('recorded_compile_ids')}: "
                "this Profile is missing compiles. Run the program with TORCH_TRACE=DIR and use "
                "`recompile-fix profile --from-trace DIR` for a complete one"
            )
    return lines


_NO_ATEXIT = "ended without atexit"
# What the Profile lacks when this torch lacks an internal the recorder reads.
_FEATURE_LOSS = {
    "compile_start_callback": "call sites and arguments are read when each compile ends",
    "guard_failures": "each recompile keeps only the reason its metrics record names",
    "frame_compile_counter": "the compiles recorded cannot be checked against torch's count",
    "compile_context": "graph breaks cannot be attached to their compiles",
}
_PATH_NAMES = {
    "in-process": "recorded in-process",
    "in-process (journal)": "recorded in-process (read back from the journal: no atexit)",
    "torch_trace": "read from TORCH_TRACE",
}
_SOURCE_NAMES = {
    "deque": "metrics deque",
    "metrics_context": "MetricsContext exit",
    "deque-scan": "deque scan",
    "exit-scan": "exit scan",
}


def recording_summary(profile: Profile) -> str:
    """Which torch ran and how its compiles were recorded, for `profile`'s closing line:
    ``torch 2.14.1, recorded in-process (metrics deque 33)``, ``torch 2.8.0, read from TORCH_TRACE``."""
    statuses = [p.get("recorder") or {} for p in profile.processes]
    paths = sorted({_PATH_NAMES.get(s.get("path") or "in-process", str(s.get("path"))) for s in statuses})
    sources: dict[str, int] = {}
    for status in statuses:
        for source, count in (status.get("sources") or {}).items():
            sources[source] = sources.get(source, 0) + int(count)
    text = f"torch {profile.torch_version or 'unknown'}, {' + '.join(paths or [_PATH_NAMES['in-process']])}"
    if sources:
        text += " (" + ", ".join(f"{_SOURCE_NAMES.get(k, k)} {v}" for k, v in sorted(sources.items())) + ")"
    return text


# -- signals -----------------------------------------------------------------------------------
# The program runs in a process group of its own, so that a signal reaches all of it (torchrun's
# ranks, a data loader's workers) and nothing else. Ctrl-C and SIGTERM sent to us are passed on
# to that group; the program stops the way it would without us (KeyboardInterrupt, its own
# SIGTERM handler), its recorder writes what it recorded, and we write that partial Profile. A
# second Ctrl-C kills the group and aborts at once. On a terminal the program's group is made
# the foreground group while it runs (as a shell does), so it reads the keyboard and gets Ctrl-C
# from the terminal itself.
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _run_child(
    argv: list[str], *, env: dict[str, str], cwd: str | None, output, boot: str | None = None
) -> tuple[int, int | None]:
    """Run the program until it exits; (its return code, the signal that stopped it or None).
    A warm runner's server runs it when one can (``warm.start``), else a process of its own."""
    received: list[int] = []
    proc: subprocess.Popen | warm.WarmProcess | None = None

    def forward(signum, _frame) -> None:
        received.append(signum)
        if proc is None:
            return  # not started yet: passed on once it is
        if signum == signal.SIGINT and received.count(signal.SIGINT) >= 2:
            _signal_group(proc, signal.SIGKILL)
            raise Interrupted(signum, aborted=True)
        _signal_group(proc, signum)

    handling = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED} if handling else {}
    terminal = _foreground_terminal() if handling else None
    try:
        proc = warm.start(argv, env=env, cwd=cwd, output=output, boot=boot)
        if proc is None:
            try:
                proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=output, stderr=output, process_group=0)
            except OSError as exc:
                raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
        if terminal is not None:
            _hand_terminal(terminal, proc.pid)
        for signum in list(received):  # arrived while it was starting
            _signal_group(proc, signum)
        code = proc.wait()
    finally:
        if terminal is not None:
            _hand_terminal(terminal, os.getpgrp())
            os.close(terminal)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc is not None:
            if proc.poll() is None:  # aborted, or an error of ours: never leave it running
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            if received:  # what the interrupted program left running in its group
                _signal_group(proc, signal.SIGKILL)
    stopped_by = received[0] if received else (-code if code < 0 and -code in _FORWARDED else None)
    return code, stopped_by


def _signal_group(proc: subprocess.Popen | warm.WarmProcess, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone


def _foreground_terminal() -> int | None:
    """Our controlling terminal, when we are its foreground group (a shell's foreground job)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _hand_terminal(fd: int, pgid: int) -> None:
    # A background group that sets the foreground group gets SIGTTOU: block it meanwhile.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, pgid)
    except OSError:
        pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _read_parts(parts: Path) -> list[dict]:
    """One raw record per process: its ``part-<pid>.json`` (written at exit), else what its
    ``part-<pid>.jsonl`` holds (written as it went; the process never reached atexit)."""
    records: list[dict] = []
    if not parts.is_dir():
        return records
    finished = set()
    for path in sorted(parts.glob("part-*.json")):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
            finished.add(path.stem)
        except (OSError, json.JSONDecodeError):
            continue  # a process killed mid-write: its .jsonl (if any) is read below
    for path in sorted(parts.glob("part-*.jsonl")):
        if path.stem not in finished:
            record = _read_journal(path)
            if record is not None:
                records.append(record)
    return records


def _read_journal(path: Path) -> dict | None:
    record: dict | None = None
    compiles, graph_breaks = [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line of a process killed mid-write
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("process"), dict):
            record = dict(entry["process"])
        elif isinstance(entry.get("compile"), dict):
            compiles.append(entry["compile"])
        elif isinstance(entry.get("graph_break"), dict):
            graph_breaks.append(entry["graph_break"])
    if record is None:
        return None
    record.update(compiles=compiles, graph_breaks=graph_breaks, exit={"status": _NO_ATEXIT})
    record["recorder"] = {"torch_version": record.get("torch_version"), "path": "in-process (journal)"}
    return record
