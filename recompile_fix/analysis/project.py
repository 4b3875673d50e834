"""The sources a rule may read: each parsed once, and only when its bytes are the ones the Profile
hashed (a rule must never place a fix by line numbers that no longer hold)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.libraries import Interpreter
from recompile_fix.profile.model import resolve, same_as_profiled

__all__ = ["Project"]


class Project:
    """The sources a rule may read, parsed once each. Resolves Profile paths against a root."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        expected_hashes: dict[str, str] | None = None,
        interpreter: Interpreter | None = None,
        read: Callable[[str], bytes] | None = None,
    ):
        self.root = Path(root)
        self.interpreter = interpreter  # where the Profile's library files (/site-packages/...) are
        # A file's bytes by its Profile path (an editor's unsaved buffer, where it has one).
        self.read = read or (lambda path: read_named_file(path, self.root, self.interpreter))
        self.expected_hashes = expected_hashes
        self.stale: set[str] = set()  # files whose bytes are not the ones the Profile saw
        self.errors: dict[str, str] = {}  # path -> why it could not be read or parsed
        self._cache: dict[str, SourceFile | Exception] = {}
        self._read_only: dict[str, SourceFile | None] = {}
        # What the rules read, for a cache of what they found (pipeline/find.py): ("source" or
        # "read_only", path) -> a digest of the bytes, None when there were none to read.
        self.reads: dict[tuple[str, str], str | None] = {}

    def source(self, path: str) -> SourceFile | None:
        """The parsed file, or None when it is unreadable, unparsable or changed since profiling
        (a rule must not place a fix by line numbers that no longer hold)."""
        if path not in self._cache:
            try:
                if self.expected_hashes is not None and path not in self.expected_hashes:
                    # Never hashed: it cannot be the file the Profile saw (nor is it an error).
                    raise LookupError(f"{path} was not seen by the Profile")
                data = self._read_noted("source", path)
                if self.expected_hashes is not None and not same_as_profiled(data, self.expected_hashes.get(path)):
                    self.stale.add(path)
                    raise LookupError(f"{path} changed since it was profiled")
                self._cache[path] = SourceFile.read(Path(path), data)  # a file parsed lately: that parse
            except Exception as exc:  # apply reports unreadable files on its own
                if not isinstance(exc, LookupError):
                    self.errors[path] = str(exc)
                self._cache[path] = exc
        value = self._cache[path]
        return None if isinstance(value, Exception) else value

    def parsed(self) -> dict[str, SourceFile]:
        """The files read so far that parsed (path -> SourceFile)."""
        return {path: value for path, value in self._cache.items() if isinstance(value, SourceFile)}

    def read_only(self, path: str) -> SourceFile | None:
        """A file under the root as it is now, whether or not the Profile saw it: for resolving
        names (a base class, an imported helper) only, never for placing an edit. None when it
        is outside the root, unreadable or unparsable."""
        if path not in self._read_only:
            found: SourceFile | None = None
            self.reads[("read_only", path)] = None
            try:
                if self._a_file_here(path):
                    found = SourceFile.read(Path(path), self._read_noted("read_only", path))
            except Exception:  # noqa: BLE001 -- a file we cannot read resolves nothing
                found = None
            self._read_only[path] = found
        return self._read_only[path]

    def as_is(self, path: str) -> SourceFile | None:
        """A file as it is on disk now, whether or not the Profile saw it or it changed since (a
        library's, one a fix changed): for facts, never for placing an edit. None when it cannot
        be read. Not parsed until a tree is asked for."""
        self.reads[("as_is", path)] = None
        try:
            source = SourceFile.read(resolve(path, self.root, self.interpreter), parse=False)
        except SourceError:
            return None
        self.reads[("as_is", path)] = _digest(source.text.encode("utf-8"))
        return source

    def _a_file_here(self, path: str) -> bool:
        """A file under the root (``read_only`` reads nothing else)."""
        file = resolve(path, self.root)
        return not os.path.isabs(path) and file.resolve().is_relative_to(self.root.resolve()) and file.is_file()

    def _read_noted(self, mode: str, path: str) -> bytes:
        self.reads[(mode, path)] = None
        data = self.read(path)
        self.reads[(mode, path)] = _digest(data)
        return data

    def unchanged(self, reads: Mapping[tuple[str, str], str | None]) -> bool:
        """Would the rules read the same bytes as ``reads`` (another run's ``self.reads``) now?"""
        for (mode, path), digest in reads.items():
            try:
                if mode == "as_is":
                    found = self.as_is(path)
                    now = _digest(found.text.encode("utf-8")) if found is not None else None
                elif mode == "read_only":
                    now = _digest(self.read(path)) if self._a_file_here(path) else None
                else:
                    now = _digest(self.read(path))
            except Exception:  # noqa: BLE001 -- unreadable now: as when nothing was read
                now = None
            if now != digest:
                return False
        return True


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()
