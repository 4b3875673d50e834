"""The copy of the user's tree that the fixes are written into, and the command pointed at it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["LINK_FILE_BYTES", "command_in", "copy_tree"]

# Left out of the copy: version control, caches, our own directory.
_SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".recompile-fix",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".ipynb_checkpoints",
}
# Linked, not copied: environments (a command like `.venv/bin/python x.py` keeps working).
_LINK_DIRS = {".venv", "venv", "node_modules"}
LINK_FILE_BYTES = 16 * 1024 * 1024  # larger non-Python files (data, checkpoints) are linked


def copy_tree(src: Path, dst: Path) -> None:
    """A copy of the project to rewrite: every file byte for byte (so the Profile's hashes hold),
    except version control, caches and ``.recompile-fix`` (left out), virtual environments and
    non-Python files over 16 MiB (symlinked to the original: read, not copied)."""
    src, dst = Path(src).resolve(), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    skip_path = dst.resolve()
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        target = dst / here.relative_to(src)
        keep = []
        for name in dirnames:
            path = here / name
            if name in _SKIP_DIRS or path == skip_path:
                continue
            if path.is_symlink():
                os.symlink(os.readlink(path), target / name)
            elif name in _LINK_DIRS or (path / "pyvenv.cfg").exists():
                os.symlink(path, target / name, target_is_directory=True)
            else:
                (target / name).mkdir()
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            path = here / name
            if path.is_symlink():
                os.symlink(os.readlink(path), target / name)
            elif not path.is_file():
                continue  # sockets, fifos
            elif not name.endswith(".py") and path.stat().st_size > LINK_FILE_BYTES:
                os.symlink(path, target / name)
            else:
                shutil.copy2(path, target / name)


def command_in(command: list[str], root: Path, tree: Path) -> list[str]:
    """The command for the copy: absolute paths into the project point into the copy instead."""
    out = []
    for arg in command:
        if os.path.isabs(arg) and (arg == str(root) or arg.startswith(str(root) + os.sep)):
            arg = str(tree / os.path.relpath(arg, root))
        out.append(arg)
    return out
