"""The sources a rule may read: each parsed once, and only when its bytes are the ones the Profile
hashed (a rule must never place a fix by line numbers that no longer hold)."""

from __future__ import annotations

import os
from pathlib import Path

from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import resolve, same_as_profiled

__all__ = ["Project"]


class Project:
    """The sources a rule may read, parsed once each. Resolves Profile paths against a root."""

    def __init__(self, root: str | os.PathLike[str], expected_hashes: dict[str, str] | None = None):
        self.root = Path(root)
        self.expected_hashes = expected_hashes
        self.stale: set[str] = set()  # files whose bytes are not the ones the Profile saw
        self.errors: dict[str, str] = {}  # path -> why it could not be read or parsed
        self._cache: dict[str, SourceFile | Exception] = {}

    def source(self, path: str) -> SourceFile | None:
        """The parsed file, or None when it is unreadable, unparsable or changed since profiling
        (a rule must not place a fix by line numbers that no longer hold)."""
        if path not in self._cache:
            try:
                file = resolve(path, self.root)
                data = file.read_bytes()
                if self.expected_hashes is not None and not same_as_profiled(data, self.expected_hashes.get(path)):
                    self.stale.add(path)
                    raise LookupError(f"{path} changed since it was profiled")
                self._cache[path] = SourceFile.read(Path(path), data)
            except Exception as exc:  # apply reports unreadable files on its own
                if not isinstance(exc, LookupError):
                    self.errors[path] = str(exc)
                self._cache[path] = exc
        value = self._cache[path]
        return None if isinstance(value, Exception) else value

    def parsed(self) -> dict[str, SourceFile]:
        """The files read so far that parsed (path -> SourceFile)."""
        return {path: value for path, value in self._cache.items() if isinstance(value, SourceFile)}
