"""The profiled text of the program's own files, kept beside the Profile by hash
(``.recompile-fix/sources/<sha256>.txt``), so that an edit made after profiling can be mapped
(``analysis.relocate``). Never as ``.py`` and never in a visible folder of the project: a
Profile written elsewhere (``profile -o run.json``) keeps them in ``.run.sources/`` beside it,
so that neither `apply .` nor the user's tools take the copies for the project's code."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from recompile_fix.profile.files import read_named_file

if TYPE_CHECKING:
    from recompile_fix.profile.model import Profile

__all__ = ["SOURCES_DIR", "keep_profiled_sources", "kept_source", "kept_sources_dir"]

SOURCES_DIR = "sources"  # under .recompile-fix/, where the Profile lives by default


def kept_sources_dir(profile_path: Path) -> Path:
    if profile_path.parent.name == ".recompile-fix":
        return profile_path.parent / SOURCES_DIR
    return profile_path.parent / f".{profile_path.stem}.{SOURCES_DIR}"


def kept_source(profile_path: Path, digest: str) -> Path:
    return kept_sources_dir(profile_path) / f"{digest}.txt"


def keep_profiled_sources(profile: Profile, profile_path: Path, root: Path) -> None:
    """Keep the text of each program file the Profile hashed, by its hash, beside the Profile."""
    folder = kept_sources_dir(profile_path)
    for path, digest in profile.sources.items():
        if path.startswith("/") or Path(path).is_absolute():
            continue
        try:
            data = read_named_file(path, root)
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            continue
        target = kept_source(profile_path, digest)
        if not target.exists():
            folder.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    _drop_unreferenced(folder, profile_path, set(profile.sources.values()))


def _drop_unreferenced(folder: Path, profile_path: Path, kept: set[str]) -> None:
    """Texts no Profile that keeps its texts in ``folder`` names any longer (each run after an
    edit keeps a new one): ``.run.sources/`` is ``run.json``'s own; ``.recompile-fix/sources/``
    serves every Profile in ``.recompile-fix/``. A file that cannot be read as a Profile there
    keeps them all."""
    if not folder.is_dir():
        return
    others = (
        [p for p in profile_path.parent.glob("*.json") if p != profile_path]
        if profile_path.parent.name == ".recompile-fix"
        else []
    )
    for other in others:
        try:
            sources = json.loads(other.read_text(encoding="utf-8")).get("sources")
        except (OSError, ValueError, AttributeError):
            return
        if isinstance(sources, dict):
            kept |= {d for d in sources.values() if isinstance(d, str)}
    for text in folder.glob("*.txt"):
        if text.stem not in kept:
            text.unlink(missing_ok=True)
