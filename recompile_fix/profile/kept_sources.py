"""The profiled text of the program's own files, kept beside the Profile by hash
(``.recompile-fix/sources/<sha256>.py``), so that an edit made after profiling can be mapped
(``analysis.relocate``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recompile_fix.profile.model import Profile

__all__ = ["SOURCES_DIR", "keep_profiled_sources"]

SOURCES_DIR = "sources"  # under the Profile's folder


def keep_profiled_sources(profile: Profile, profile_path: Path, root: Path) -> None:
    """Keep the text of each program file the Profile hashed, by its hash, beside the Profile."""
    folder = profile_path.parent / SOURCES_DIR
    for path, digest in profile.sources.items():
        if path.startswith("/") or Path(path).is_absolute():
            continue
        try:
            data = (root / path).read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            continue
        target = folder / f"{digest}.py"
        if not target.exists():
            folder.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
