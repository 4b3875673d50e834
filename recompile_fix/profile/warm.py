"""The warm runner: program runs that do not pay for ``import torch`` each time.

A run of ``python script.py ARGS`` (or ``python -m module ARGS``) is handed to a server process
of the same interpreter, with the same environment, that imported torch once
(``_bootstrap/zygote.py``) and forks a child per run. The child is the program: its own process
group (signals and the terminal are handled as for a process we start), our stdin/stdout/stderr,
its environment, working directory and argv as asked, the recorder installed as
``sitecustomize`` installs it. A run the server cannot give exactly (another interpreter, other
variables, interpreter options, a launcher such as torchrun) runs the ordinary way.

Where the servers live:

* ``RECOMPILE_FIX_WARM_DIR=DIR``: in DIR, shared by every recompile-fix process that names it
  (the test suite sets it for a session; a user can for a loop of commands). A server exits
  when DIR's socket file for it is removed (the least used of more than
  ``RECOMPILE_FIX_WARM_MAX``, default 4, is), or after ``RECOMPILE_FIX_WARM_IDLE`` seconds
  (default 600) without a run.
* otherwise, for a command that runs the program more than once (``verify``, ``fix``,
  ``apply --verify`` call ``enable``): in a private directory, ended when the command ends.

``RECOMPILE_FIX_WARM_PRELOAD=mod1,mod2`` (set for a run): its server also imports these modules
before the first fork (a server per list), for programs that import them anyway: a transformers
program saves about 5 s of CPU a run with ``transformers.modeling_utils``. The program then starts
with them imported, so set it only for programs that import them first thing (the test suite
does for its transformers programs).

``RECOMPILE_FIX_WARM=0`` turns it off. The first run of a server costs what a cold run costs
(it imports torch once); each later one saves that import (about 5 s of CPU here).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import recompile_fix
from recompile_fix.profile.libraries import is_python

__all__ = [
    "IDLE_ENV",
    "MAX_ENV",
    "OFF_ENV",
    "PRELOAD_ENV",
    "WARM_DIR_ENV",
    "ZYGOTE_ENV",
    "WarmProcess",
    "enable",
    "program_of",
    "run_captured",
    "start",
    "stop_servers",
]

WARM_DIR_ENV = "RECOMPILE_FIX_WARM_DIR"
IDLE_ENV = "RECOMPILE_FIX_WARM_IDLE"
MAX_ENV = "RECOMPILE_FIX_WARM_MAX"
OFF_ENV = "RECOMPILE_FIX_WARM"
PRELOAD_ENV = "RECOMPILE_FIX_WARM_PRELOAD"
ZYGOTE_ENV = "RECOMPILE_FIX_ZYGOTE"  # set in the server only: its sitecustomize starts no recorder

_PACKAGE_DIR = Path(recompile_fix.__file__).resolve().parent
_SOCKET_PATH_MAX = 100  # AF_UNIX paths are at most 107 bytes on Linux

# Variables that differ run by run and that nothing reads before the program starts (the child
# gets the run's own values): ours, a shell's, pytest's (its current test's name changes per test),
# and cuBLAS's workspace setting (read when the program first uses cuBLAS; `verify` sets it).
_PER_RUN_PREFIXES = ("RECOMPILE_FIX_", "PYTEST_")
_PER_RUN = frozenset({"PWD", "OLDPWD", "_", "SHLVL", "CUBLAS_WORKSPACE_CONFIG"})

_private: list[str] = []  # this process's private directory, when `enable` made one


def enable() -> None:
    """Keep servers for this process's runs (a command that runs the program more than once)."""
    if _private or os.environ.get(WARM_DIR_ENV) or os.environ.get(OFF_ENV) == "0":
        return
    from recompile_fix.profile import scratch

    scratch.sweep()  # what a killed run left
    _private.append(tempfile.mkdtemp(prefix=f"rfw-{os.getpid()}-"))
    scratch.register(_private[0])
    atexit.register(_stop_private)


def _stop_private() -> None:
    for directory in _private:
        stop_servers(Path(directory))
        shutil.rmtree(directory, ignore_errors=True)
    _private.clear()


def stop_servers(directory: Path) -> None:
    for pid_file in directory.glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


def _directory() -> Path | None:
    if os.environ.get(OFF_ENV) == "0":
        return None
    shared = os.environ.get(WARM_DIR_ENV)
    if shared:
        return Path(shared)
    return Path(_private[0]) if _private else None


def available() -> bool:
    """Would ``start`` try a server: this process's (``enable``) or the environment's?"""
    return _directory() is not None


def program_of(argv: list[str], cwd: str | None = None) -> list[str] | None:
    """``[script, *args]`` or ``["-m", module, *args]`` when ``argv`` is an interpreter running a
    script (found from ``cwd``, the run's directory) or a module with no interpreter options; None
    for anything else."""
    if len(argv) < 2 or not is_python(argv[0]):
        return None
    if argv[1] == "-m" and len(argv) > 2 and not argv[2].startswith("-"):
        return argv[1:]
    if argv[1].startswith("-") or not os.path.isfile(os.path.join(cwd or os.getcwd(), argv[1])):
        return None
    return argv[1:]


def _server_env(env: dict[str, str], boot: str | None) -> dict[str, str]:
    """The variables a server must have been started with to run ``env``'s program: ours and the
    run's bootstrap directory left out (they differ run by run and are read after the fork)."""
    kept = {k: v for k, v in env.items() if not k.startswith(_PER_RUN_PREFIXES) and k not in _PER_RUN}
    entries = [p for p in kept.get("PYTHONPATH", "").split(os.pathsep) if p and p != boot]
    if entries:
        kept["PYTHONPATH"] = os.pathsep.join(entries)
    else:
        kept.pop("PYTHONPATH", None)
    return kept


def _key(interpreter: str, server_env: dict[str, str], preload: str = "") -> str:
    text = json.dumps([interpreter, sorted(server_env.items()), str(_PACKAGE_DIR), preload])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class WarmProcess:
    """A program run by a server: what ``subprocess.Popen`` gives for our use (pid, wait, poll)."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = b""

    def _read(self, block: bool) -> None:
        while self.returncode is None:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
                message = json.loads(line)
                if "exit" in message:
                    self.returncode = int(message["exit"])
                    self._conn.close()
                continue
            self._conn.setblocking(block)
            try:
                chunk = self._conn.recv(4096)
            except BlockingIOError:
                return
            if not chunk:  # the server died before the child ended: end the child too
                with contextlib.suppress(OSError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.returncode = -signal.SIGKILL
                self._conn.close()
                return
            self._buffer += chunk

    def wait(self) -> int:
        self._read(block=True)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        self._read(block=False)
        return self.returncode


def start(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    output,
    boot: str | None,
    recorder: bool = True,
    stdout=None,
    stderr=None,
) -> WarmProcess | None:
    """Run ``argv`` in a warm server; None when it cannot be run exactly that way (run it cold).
    ``output``: where its stdout and stderr go (default: ours); ``stdout``/``stderr`` apart."""
    directory = _directory()
    program = program_of(argv, cwd)
    if directory is None or program is None:
        return None
    server_env = _server_env(env, boot)
    preload = env.get(PRELOAD_ENV, "")
    # `.venv/bin/python` names it from the run's directory; the server starts from its own.
    if os.sep in argv[0]:
        interpreter = os.path.join(os.path.abspath(cwd or os.getcwd()), argv[0])
    else:
        interpreter = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
    key = _key(interpreter, server_env, preload)
    sock_path = directory / f"{key}.sock"
    if len(str(sock_path)) > _SOCKET_PATH_MAX or (directory / f"{key}.refused").exists():
        return None
    directory.mkdir(parents=True, exist_ok=True)  # RECOMPILE_FIX_WARM_DIR may name a new one
    with open(directory / f"{key}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(sock_path)
        if conn is None:
            _retire_least_used(directory)
            if not _start_server(interpreter, server_env, directory, key, preload):
                return None
            conn = _connect(sock_path)
            if conn is None:
                return None
    out = (stdout or output).fileno() if (stdout or output) is not None else 1
    err = (stderr or output).fileno() if (stderr or output) is not None else 2
    stdin = 0 if _is_open(0) else os.open(os.devnull, os.O_RDONLY)
    request = {"argv": program, "env": env, "cwd": os.path.abspath(cwd or os.getcwd()), "recorder": recorder}
    try:
        socket.send_fds(conn, [(json.dumps(request) + "\n").encode("utf-8")], [stdin, out, err])
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise OSError("the server closed the connection")
            reply += chunk
    except OSError:
        conn.close()
        return None
    finally:
        if stdin != 0:
            os.close(stdin)
    with contextlib.suppress(OSError):
        os.utime(directory / f"{key}.pid")  # used now: the last to be retired
    first, _, rest = reply.partition(b"\n")
    process = WarmProcess(conn, int(json.loads(first)["pid"]))
    process._buffer = rest
    return process


def _retire_least_used(directory: Path) -> None:
    """Keep at most ``RECOMPILE_FIX_WARM_MAX`` servers (default 4; each holds an imported torch,
    about 0.5 GB): the one used longest ago loses its socket, and so ends once its runs end."""
    limit = int(os.environ.get(MAX_ENV, "4") or 4)
    servers = sorted(directory.glob("*.pid"), key=lambda p: p.stat().st_mtime)
    for pid_file in servers[: max(0, len(servers) - limit + 1)]:
        for path in (pid_file.with_suffix(".sock"), pid_file):
            with contextlib.suppress(OSError):
                path.unlink()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _connect(path: Path) -> socket.socket | None:
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        with contextlib.suppress(OSError):
            path.unlink()  # a server that is gone
        return None
    return conn


def _start_server(interpreter: str, server_env: dict[str, str], directory: Path, key: str, preload: str = "") -> bool:
    """Start a server for ``key`` and wait until it listens; False (and never again for this
    key in ``directory``) when it cannot serve."""
    boot = directory / f"{key}.boot"
    if not boot.exists():
        boot.mkdir()
        shutil.copy(_PACKAGE_DIR / "_bootstrap" / "sitecustomize.py", boot / "sitecustomize.py")
        (boot / "recompile_fix").symlink_to(_PACKAGE_DIR, target_is_directory=True)
    env = dict(server_env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(boot), server_env.get("PYTHONPATH", "")) if p)
    env[ZYGOTE_ENV] = "1"
    if preload:
        env[PRELOAD_ENV] = preload
    idle = os.environ.get(IDLE_ENV, "600")
    script = boot / "recompile_fix" / "_bootstrap" / "zygote.py"
    with open(directory / f"{key}.log", "ab") as log:
        try:
            server = subprocess.Popen(
                [interpreter, str(script), str(directory / f"{key}.sock"), idle],
                env=env,
                cwd=str(directory),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                process_group=0,
            )
        except OSError:
            return False
    assert server.stdout is not None
    line = server.stdout.readline()  # "ready" once torch is imported and the socket listens
    server.stdout.close()
    if line.strip() != b"ready":
        with contextlib.suppress(OSError):
            server.kill()
        server.wait()
        (directory / f"{key}.refused").write_bytes(line)
        return False
    (directory / f"{key}.pid").write_text(str(server.pid))
    return True


def run_captured(argv: list[str], *, env: dict[str, str], cwd: str | None) -> tuple[int, str, str] | None:
    """Run ``argv`` in a warm server without the recorder, as ``subprocess.run(capture_output=True,
    text=True)`` would: (exit code, stdout, stderr); None when it cannot be run warm."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = start(argv, env=env, cwd=cwd, output=None, boot=None, recorder=False, stdout=out, stderr=err)
        if process is None:
            return None
        code = process.wait()
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace")
