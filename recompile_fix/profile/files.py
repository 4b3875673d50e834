"""Reading the files a Profile names. A Profile is untrusted input: the README tells CI users to
commit theirs, so it is repository content, and a hostile one names whatever it likes
(``/proc/self/environ``, ``/dev/zero``, a FIFO, a ``.py`` link out of the tree). Every file a
Profile names is read here, and only:

* a regular file (never a device, FIFO or socket: opened without blocking, then checked);
* inside the project (symbolic links followed, to where they lead), or a Python file inside the
  interpreter's library directories (``/site-packages/...``, ``libraries.py``), never under
  ``/proc``, ``/sys`` or ``/dev``;
* at most ``MAX_FILE_BYTES``, read with a bounded read (a ``/proc`` file says it has 0 bytes);
* where the caller gives the hash the Profile recorded, only when its bytes are those (a hostile
  Profile learns nothing it did not know: it has to know the bytes to know their hash).

A refusal is an ``OSError`` (``UnsafeFile``), so a caller that treats an unreadable file as
"unreadable, not changed" treats a refused one the same way; its message is one line (the path
as ``repr`` where it holds a control character)."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from recompile_fix.notebook import NotebookError, source_of
from recompile_fix.profile.libraries import Interpreter, current_interpreter, locate_library_file
from recompile_fix.suppression import strip_suppressions

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PROFILE_BYTES",
    "UnsafeFile",
    "place_named_file",
    "read_bounded",
    "read_named_file",
    "same_as_profiled",
    "sha256_bytes",
    "shown_path",
]

MAX_FILE_BYTES = 16 * 2**20  # the largest source file of transformers is under 1 MiB
MAX_PROFILE_BYTES = 256 * 2**20  # a Profile of 15,000 frames is 28 MB
_SYSTEM_TREES = ("/proc", "/sys", "/dev")  # never a source file there, whatever a path says
_SOURCE_SUFFIXES = (".py", ".pyi")


class UnsafeFile(OSError):
    """A file a Profile names that is not read: not regular, too large, outside the project and
    the libraries, or not the bytes the Profile hashed."""


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` for a one-line message: as it is, or as ``repr`` where it holds a control
    character (a newline would split the line, a NUL cut it)."""
    text = os.fspath(path)
    return repr(text) if any(ord(c) < 32 or c == "\x7f" for c in text) else text


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (links followed), at most ``limit`` of them: a
    device, FIFO or socket, or a larger file, raises ``UnsafeFile``. Opened without blocking (a
    FIFO with no writer would wait for ever) and read with a bound (``/dev/zero`` never ends, a
    ``/proc`` file says it has 0 bytes)."""
    if "\0" in os.fspath(path):
        raise UnsafeFile(errno.EINVAL, "a path with a NUL character", os.fspath(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(errno.EINVAL, "not a regular file (a device, FIFO or socket)", os.fspath(path))
        if info.st_size > limit:
            raise UnsafeFile(errno.EFBIG, f"larger than {limit // 2**20} MiB", os.fspath(path))
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UnsafeFile(errno.EFBIG, f"larger than {limit // 2**20} MiB", os.fspath(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _library_dirs(root: str | os.PathLike[str], interpreter: Interpreter | None) -> list[str]:
    """The directories a library file may lie in: this interpreter's, and the recorded one's
    that have the shape of a library directory (a Profile could name ``/home`` as its prefix)."""
    dirs: list[str] = []
    here = current_interpreter()
    dirs += [*here.site, *here.stdlib]
    if interpreter is not None:
        recorded = interpreter.absolute(root)
        dirs += [
            d for d in recorded.site if os.path.basename(os.path.normpath(d)) in ("site-packages", "dist-packages")
        ]
        dirs += [d for d in recorded.stdlib if os.path.basename(os.path.normpath(d)).startswith(("python3", "Lib"))]
    return [os.path.realpath(d) for d in dirs if d]


def place_named_file(path: str, root: str | os.PathLike[str], interpreter: Interpreter | None = None) -> Path:
    """The file on this machine that the Profile path ``path`` names, where it may be read: inside
    the project ``root`` (where its links lead), or a Python file inside a library directory.
    Raises ``UnsafeFile`` otherwise."""
    if any(c in path for c in "\0\n\r"):
        raise UnsafeFile(errno.EINVAL, "a path with a control character", os.fspath(path))
    library = locate_library_file(path, interpreter, root)
    file = library if library is not None else (Path(path) if os.path.isabs(path) else Path(root, path))
    real = os.path.realpath(file)
    if any(_within(real, tree) for tree in _SYSTEM_TREES):
        raise UnsafeFile(errno.EACCES, f"leads to {shown_path(real)}, a system file", os.fspath(path))
    if _within(real, os.path.realpath(root)):
        return file
    if real.endswith(_SOURCE_SUFFIXES) and any(_within(real, d) for d in _library_dirs(root, interpreter)):
        return file
    raise UnsafeFile(errno.EACCES, "outside the project and the interpreter's libraries", os.fspath(path))


def read_named_file(
    path: str,
    root: str | os.PathLike[str],
    interpreter: Interpreter | None = None,
    *,
    expected: str | None = None,
    checked: bool = False,
    limit: int = MAX_FILE_BYTES,
) -> bytes:
    """The bytes of the file a Profile names (``path``, as the Profile spells it), read as this
    module's docstring says; a notebook's are its code cells' text (``recompile_fix.notebook``:
    what the rules read and the Profile hashed). ``checked``: only when they are the bytes the
    Profile hashed (``expected``; suppression comments added since aside), else ``UnsafeFile``."""
    data = read_bounded(place_named_file(path, root, interpreter), limit)
    try:
        data = source_of(path, data)
    except NotebookError as exc:
        raise UnsafeFile(errno.EINVAL, f"not a notebook that can be read ({exc})", path) from None
    if checked and not same_as_profiled(data, expected):
        raise UnsafeFile(errno.ESTALE, "not the bytes the Profile hashed", path)
    return data


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def same_as_profiled(data: bytes, expected: str | None) -> bool:
    """Are these the bytes the Profile hashed, but for suppression comments added since? Such a
    comment moves no line or column before it, so the Profile's positions still hold."""
    if expected is None:
        return False
    if sha256_bytes(data) == expected:
        return True
    if b"recompile-fix" not in data and b"noqa" not in data.lower():
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return sha256_bytes(strip_suppressions(text).encode("utf-8")) == expected
