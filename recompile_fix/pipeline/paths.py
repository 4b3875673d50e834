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

__all__ = ["discover", "git_ignored", "inside", "is_source", "real_file", "relative_to", "skipped_sources"]


def real_file(path: str, root: Path) -> Path:
    """The file ``path`` names, links followed."""
    return resolve(path, root).resolve()


def inside(path: Path, roots: list[Path]) -> bool:
    """Is ``path`` (links followed) one of ``roots`` or under one?"""
    path = path.resolve()
    return any(path == root or root in path.parents for root in roots)


def relative_to(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """``os.path.relpath(path, root)``, by slicing where ``path`` (normalized, as ``discover``
    gives it) lies under ``root``: a large tree asks it for every file."""
    text, base = os.fspath(path), os.fspath(root)
    if text.startswith(base) and text[len(base) : len(base) + 1] == os.sep and not base.endswith(os.sep):
        return text[len(base) + 1 :]
    return os.path.relpath(text, base)


def is_source(path: str | os.PathLike[str]) -> bool:
    """Is this a file the rules read (Python source)? The one test, for a file named on the
    command line and for one found in a folder: a new kind (a notebook) is added here."""
    return os.path.splitext(os.fspath(path))[1] in (".py", NOTEBOOK_SUFFIX)


def skipped_sources(paths: Iterable[str]) -> list[str]:
    """The files named in ``paths`` that are not sources (``is_source``): `apply` warns of each
    and skips it, as ruff does."""
    return [p for p in paths if Path(p).is_file() and not is_source(p)]


def discover(
    paths: list[str], root: Path, excluded: Callable[[str], bool], walks: dict[Path, list[Path]] | None = None
) -> list[Path]:
    """Python files and notebooks under ``paths``, less what the configuration excludes and, in a
    git work tree, what git ignores (as ruff does: copies in an ignored `work/`, build output); an
    explicitly named source file is always included (one that is not a source,
    ``skipped_sources``, never). ``walks``: the folders walked before in this run, with what was
    found there (read and added to: the training search walks the whole project after the scan
    walked a part of it)."""
    files: list[Path] = []
    walked: list[Path] = []
    walks = {} if walks is None else walks
    for given in paths:
        path = Path(given).resolve()
        if path.is_file():
            if is_source(path):
                files.append(path)
            continue
        walked.extend(_walk(path, root, excluded, walks))
    ignored = git_ignored(root, walked)
    return files + [f for f in walked if f not in ignored]


def _walk(top: Path, root: Path, excluded: Callable[[str], bool], walks: dict[Path, list[Path]]) -> list[Path]:
    """The sources under ``top`` in ``os.walk``'s order (a folder's files, sorted, then each
    subfolder's, sorted; links to folders not followed), less what ``excluded`` says; a folder in
    ``walks`` is not walked again, and ``top`` is added to it."""
    if top in walks:
        return walks[top]
    try:
        entries = sorted(os.scandir(top), key=lambda entry: entry.name)
    except OSError:  # as os.walk: a folder that cannot be listed is left out
        return []
    rel_dir = relative_to(top, root)
    found: list[Path] = []
    folders: list[Path] = []
    for entry in entries:
        relative = os.path.normpath(os.path.join(rel_dir, entry.name))
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            if not excluded(relative) and not entry.is_symlink():
                folders.append(Path(entry.path))
        elif is_source(entry.name) and not excluded(relative):
            found.append(Path(entry.path))
    for folder in folders:
        found.extend(_walk(folder, root, excluded, walks))
    walks[top] = found
    return found


def git_ignored(root: Path, files: list[Path]) -> set[Path]:
    """The ``files`` git ignores (``.gitignore``, ``.git/info/exclude``, the global excludes) where
    ``root`` is in a git work tree; none where it is not, or git cannot say."""
    if not files or not _in_work_tree(root) or shutil.which("git") is None:
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


def _in_work_tree(root: Path) -> bool:
    """Whether git could find a repository from ``root``: a ``.git`` (folder, or file for a
    worktree or submodule) in it or above it, or one named by the environment. Without one, git
    answers "not a work tree"; asked here, no process is started for it (an `apply` in a folder
    outside git, each of the property suite's 2,000)."""
    if "GIT_DIR" in os.environ or "GIT_WORK_TREE" in os.environ:
        return True
    folder = root.resolve()
    return any(os.path.lexists(os.path.join(p, ".git")) for p in (folder, *folder.parents))
