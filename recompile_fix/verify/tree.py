"""The copy of the user's tree that the fixes are written into, and the command pointed at it.

The copy is of the project (``Checkout.of``: the directory with the repository or pyproject
marker above the one the command runs from, widened to hold every file of the program the Profile
names), so a helper imported from a sibling folder is in the copy too, and the command runs from
the same place inside it."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from recompile_fix.profile.model import Profile

__all__ = ["LINK_FILE_BYTES", "Checkout", "command_in", "copy_tree", "program_files", "through_links"]

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
# Linked, not copied: environments (a command like `.venv/bin/python x.py` keeps working): these
# names, and any folder that is a virtualenv (pyvenv.cfg) or a conda prefix (conda-meta/).
_LINK_DIRS = {".venv", "venv", "node_modules"}
LINK_FILE_BYTES = 16 * 1024 * 1024  # larger non-Python files (data, checkpoints) are linked


def copy_tree(src: Path, dst: Path) -> None:
    """A copy of the project to rewrite: every file byte for byte (so the Profile's hashes hold),
    except version control, caches and ``.recompile-fix`` (left out), virtual environments, conda
    prefixes and non-Python files over 16 MiB (symlinked to the original: read, not copied)."""
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
            elif name in _LINK_DIRS or (path / "pyvenv.cfg").exists() or (path / "conda-meta").is_dir():
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


def through_links(command: list[str], user_cwd: Path, copy_cwd: Path) -> list[str]:
    """The command for the copy, its program by the user's own path where the copy reaches it
    through a link (`.venv/bin/python` under a linked `.venv`): the same interpreter, its
    ``sys.prefix`` as in the profile run, and one warm server for every copy."""
    program = command[0] if command else ""
    if not program or os.path.isabs(program) or os.sep not in program:
        return command
    here = copy_cwd
    for part in Path(program).parts[:-1]:
        here = here / part
        if here.is_symlink():
            return [str(user_cwd / program), *command[1:]]
    return command


_MARKERS = (".git", ".hg", "pyproject.toml", "setup.py", "setup.cfg")


def _too_wide(directory: Path) -> bool:
    return directory == Path(directory.anchor) or directory == Path.home().resolve()


def _installed_dirs() -> list[Path]:
    """Where installed code lives (the interpreter's library, site-packages): never the program's."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    dirs.update(p for p in sysconfig.get_paths().values() if p)
    return [Path(d).resolve() for d in dirs]


def program_files(paths: Iterable[str], cwd: Path) -> list[Path]:
    """The program's own files among a Profile's (absolute or relative to ``cwd``), installed
    code (site-packages, the standard library, an environment) left out."""
    installed = _installed_dirs()
    found = []
    for path in paths:
        file = (cwd / path).resolve()
        parts = set(file.parts)
        if "site-packages" in parts or "dist-packages" in parts or any(d in file.parents for d in installed):
            continue
        found.append(file)
    return found


@dataclass(frozen=True)
class Checkout:
    """A tree the command runs in: its project root, and the directory the command runs from."""

    root: Path
    cwd: Path

    @classmethod
    def of(cls, cwd: str | os.PathLike[str], profile: Profile | None = None) -> "Checkout":
        """The project around ``cwd``: the nearest directory above it with a repository or
        packaging marker (else ``cwd``), widened to hold the program's files and import paths
        that ``profile`` recorded (installed code aside), though never to the filesystem root or
        the home directory itself."""
        here = Path(cwd).resolve()
        root = next((d for d in (here, *here.parents) if any((d / m).exists() for m in _MARKERS)), here)
        if _too_wide(root):  # a dotfiles repository in the home directory, say
            root = here
        if profile is not None:
            places = [f.parent for f in program_files(profile.sources, here)]
            places += program_files(profile.import_paths, here)
            outside = [p for p in places if p != root and root not in p.parents]
            if outside:
                common = Path(os.path.commonpath([str(root), *map(str, outside)]))
                if not _too_wide(common):
                    root = common
        return cls(root=root, cwd=here)

    def copy_to(self, dst: Path) -> "Checkout":
        """A copy of the project (``copy_tree``) and the same place inside it."""
        copy_tree(self.root, dst)
        return Checkout(root=Path(dst).resolve(), cwd=Path(dst).resolve() / self.cwd.relative_to(self.root))

    def in_copy(self, copy: "Checkout", path: str) -> str:
        """``path`` of this tree, as the same file in ``copy`` (paths outside it unchanged)."""
        return command_in([path], self.root, copy.root)[0]

    def from_copy(self, copy: "Checkout", path: str) -> str:
        """``path`` of ``copy``, as the same file in this tree (paths outside it unchanged)."""
        return command_in([path], copy.root, self.root)[0]
