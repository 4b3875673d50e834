"""One writer per project at a time: ``apply`` (and everything that writes through the fix
pipeline) holds an exclusive lock on ``.recompile-fix/lock`` from reading the Profile to
recording what it wrote, so two runs at once never interleave: the second waits, then finds the
files already fixed. Writes also compare each file's bytes with the ones the fix was computed
from (``pipeline.fix``), which holds even where no lock can be taken (a read-only
``.recompile-fix``, a platform without ``fcntl``).

The lock is reentrant within a process (a command that holds it may call the pipeline, which
takes it again) and released by the kernel when the process dies, so a killed run never leaves
the project locked.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the hash comparison at write time still holds
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "project_lock"]

LOCK_FILE = ".recompile-fix/lock"

_guard = threading.RLock()
_held: dict[str, tuple[int, int]] = {}  # lock path -> (fd, depth)


@contextmanager
def project_lock(root: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the project's write lock (blocking until the run holding it ends)."""
    path = str(Path(root).resolve() / LOCK_FILE)
    with _guard:
        if path in _held:
            fd, depth = _held[path]
            _held[path] = (fd, depth + 1)
            acquired = True
        else:
            acquired = _acquire(path)
    try:
        yield
    finally:
        if acquired:
            with _guard:
                fd, depth = _held[path]
                if depth > 1:
                    _held[path] = (fd, depth - 1)
                else:
                    del _held[path]
                    os.close(fd)  # closing the descriptor releases the lock


def _acquire(path: str) -> bool:
    if fcntl is None:
        return False
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False  # cannot create the lock file: the write-time comparison still guards
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return False
    _held[path] = (fd, 1)
    return True
