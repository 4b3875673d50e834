"""Where a path of the project is: the file it names (links followed), and whether it lies under
given roots. The fix pipeline's stages agree on both (``find`` plans a file once under all its
names; ``write`` writes through a link only into the project). And which files under some paths
are the project's sources (``discover``): the static scan's and the training search's."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from recompile_fix.notebook import NOTEBOOK_SUFFIX
from recompile_fix.profile.model import resolve

__all__ = ["discover", "git_ignored", "inside", "is_source", "real_file", "skipped_sources"]


def real_file(path: str, root: Path) -> Path:
    """The file ``path`` names, links followed."""
    return resolve(path, root).resolve()


def inside(path: Path, roots: list[Path]) -> bool:
    """Is ``path`` (links followed) one of ``roots`` or under one?"""
    path = path.resolve()
    return any(path == root or root in path.parents for root in roots)


def is_source(path: str | os.PathLike[str]) -> bool:
    """Is this a file the rules read (Python source)? The one test, for a file named on the
    command line and for one found in a folder: a new kind (a notebook) is added here."""
    return os.path.splitext(os.fspath(path))[1] in (".py", NOTEBOOK_SUFFIX)


def skipped_sources(paths: Iterable[str]) -> list[str]:
    """The files named in ``paths`` that are not sources (``is_source``): `apply` warns of each
    and skips it, as ruff does."""
    return [p for p in paths if Path(p).is_file() and not is_source(p)]


def discover(paths: list[str], root: Path, excluded: Callable[[str], bool]) -> list[Path]:
    """Python files and notebooks under ``paths``, less what the configuration excludes and, in a
    git work tree, what git ignores (as ruff does: copies in an ignored `work/`, build output); an
    explicitly named source file is always included (one that is not a source,
    ``skipped_sources``, never)."""
    files: list[Path] = []
    walked: list[Path] = []
    for given in paths:
        path = Path(given).resolve()
        if path.is_file():
            if is_source(path):
                files.append(path)
            continue
        for directory, dirnames, filenames in os.walk(path):
            rel_dir = os.path.relpath(directory, root)
            dirnames[:] = sorted(d for d in dirnames if not excluded(os.path.normpath(os.path.join(rel_dir, d))))
            for name in sorted(filenames):
                if is_source(name) and not excluded(os.path.normpath(os.path.join(rel_dir, name))):
                    walked.append(Path(directory, name))
    ignored = git_ignored(root, walked)
    return files + [f for f in walked if f not in ignored]


def git_ignored(root: Path, files: list[Path]) -> set[Path]:
    """The ``files`` git ignores (``.gitignore``, ``.git/info/exclude``, the global excludes) where
    ``root`` is in a git work tree; none where it is not, or git cannot say."""
    if not files or shutil.which("git") is None:
        return set()
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "--stdin", "-z"],
            input=b"\0".join(os.fsencode(f) for f in files),
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode not in (0, 1):  # 128: not a work tree (or git failed): nothing ignored
        return set()
    return {Path(os.fsdecode(p)) for p in done.stdout.split(b"\0") if p}
