"""Where a path of the project is: the file it names (links followed), and whether it lies under
given roots. The fix pipeline's stages agree on both (``find`` plans a file once under all its
names; ``write`` writes through a link only into the project)."""

from __future__ import annotations

from pathlib import Path

from recompile_fix.profile.model import resolve

__all__ = ["inside", "real_file"]


def real_file(path: str, root: Path) -> Path:
    """The file ``path`` names, links followed."""
    return resolve(path, root).resolve()


def inside(path: Path, roots: list[Path]) -> bool:
    """Is ``path`` (links followed) one of ``roots`` or under one?"""
    path = path.resolve()
    return any(path == root or root in path.parents for root in roots)
