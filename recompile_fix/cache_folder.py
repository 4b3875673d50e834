"""The project's ``.recompile-fix/cache/`` folder: what earlier runs derived (the static scan,
the rules' findings, the torch an interpreter has), made by this machine for this machine.

It is never repository content: the Profile and its profiled texts beside it are committed for
CI (docs/configuration.md), but a cache that `apply` reads findings from would let a commit
choose the edits `apply` writes, without the rules. So the folder holds a ``.gitignore`` that
ignores all of it, as pytest's and ruff's caches do."""

from __future__ import annotations

from pathlib import Path

__all__ = ["make_cache_folder"]

_GITIGNORE = "# recompile-fix's cache: made on this machine, never committed\n*\n"


def make_cache_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) with its ``.gitignore``; OSError as mkdir raises it."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        try:
            ignore.write_text(_GITIGNORE, encoding="utf-8")
        except OSError:
            pass  # a cache that cannot say so is still a cache
