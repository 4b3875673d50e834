"""Our temp directories (the copies of the tree `verify` and `fix` rewrite, the recorder's files,
the warm runner's sockets), each named with the pid of the process that owns it
(``recompile-fix-KIND-PID-*``, ``rfw-PID-*``), so that what a killed run left is found and
removed at the next start (``sweep``) once its owner is gone; while a run lives, the program it
runs is told which of them to remove should the run be killed (``_bootstrap.watchdog``).

The owner of a ``scratch_dir`` also holds an advisory lock on its ``.owner`` file: a pid seen
from another pid namespace (a container sharing the temp directory) may look gone, a held lock
never does."""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from recompile_fix._bootstrap.watchdog import alive

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["KeptDir", "owned", "register", "scratch_dir", "sweep", "unregister"]

_OURS = re.compile(r"^(?:recompile-fix-[a-z]+|rfw)-(?P<pid>\d+)-")
_OWNER_FILE = ".owner"
_owned: list[str] = []
_swept: list[bool] = []


def prefix(kind: str) -> str:
    return f"recompile-fix-{kind}-{os.getpid()}-"


@contextmanager
def scratch_dir(kind: str) -> Iterator[str]:
    """A temp directory of this process's, removed when done (as ``tempfile.TemporaryDirectory``)."""
    sweep()
    path = tempfile.mkdtemp(prefix=prefix(kind))
    register(path)
    owner = _hold(path)
    try:
        yield path
    finally:
        unregister(path)
        shutil.rmtree(path, ignore_errors=True)
        if owner is not None:
            os.close(owner)


class KeptDir:
    """A temp directory of this process's that outlives a ``with`` block (as
    ``tempfile.TemporaryDirectory``: removed by ``cleanup`` or when collected), locked as a
    ``scratch_dir`` is until then, so that no other process's ``sweep`` takes it for a dead one."""

    def __init__(self, kind: str) -> None:
        sweep()
        self.name = tempfile.mkdtemp(prefix=prefix(kind))
        self._finalizer = weakref.finalize(self, _remove, self.name, _hold(self.name))

    def cleanup(self) -> None:
        self._finalizer()


def _remove(path: str, owner: int | None) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if owner is not None:
        os.close(owner)


def register(path: str) -> None:
    _owned.append(path)


def unregister(path: str) -> None:
    with suppress(ValueError):
        _owned.remove(path)


def owned() -> list[str]:
    """This process's temp directories, now."""
    return list(_owned)


def sweep(directory: str | None = None, *, force: bool = False) -> list[str]:
    """Remove the temp directories whose owner is gone (once per process unless ``force``);
    the names removed. A warm runner's directory has its servers stopped first."""
    if _swept and not force:
        return []
    _swept.append(True)
    directory = directory or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _OURS.match(name)
        path = Path(directory, name)
        if match is None or not path.is_dir() or path.is_symlink() or _owned_now(path, int(match["pid"])):
            continue
        for pid_file in path.glob("*.pid"):  # a warm runner's servers
            with suppress(OSError, ValueError):
                server = int(pid_file.read_text())
                if b"zygote" in Path(f"/proc/{server}/cmdline").read_bytes():  # not a pid used again
                    os.kill(server, signal.SIGTERM)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(name)
    return removed


def _hold(path: str) -> int | None:
    """Lock ``path``'s ``.owner`` file for as long as the descriptor is open (not inherited)."""
    if fcntl is None:  # pragma: no cover - Windows: the pid alone says
        return None
    try:
        fd = os.open(os.path.join(path, _OWNER_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _owned_now(path: Path, pid: int) -> bool:
    """Is the directory's owner still running? Its lock, where it took one, says; else its pid."""
    lock = path / _OWNER_FILE
    if fcntl is None or not lock.exists():
        return alive(pid)
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return alive(pid)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return alive(pid)
    finally:
        os.close(fd)
    return False
