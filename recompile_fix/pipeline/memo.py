"""What the pipeline derives from one file's bytes, kept between runs: whether a Finding's fix is
already in the code (``settle``), each Finding's own fix (the JSON and SARIF outputs) and a
file's rewrite (``apply --check``, ``--diff``). Each is a pure function of the file's bytes, the
Findings asked about, the tool's code and the few settings named in its key, so a re-run over an
unchanged tree answers from here and parses nothing (the static scan caches the step before).

Measured on transformers' ``models/`` (528 files with a Finding): a warm ``apply --check
--output-format json`` spent 109 s re-parsing for ``settle`` and 335 s for each Finding's fix,
the static scan's cache notwithstanding.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from recompile_fix.cache_folder import make_cache_folder
from recompile_fix.pipeline.scan import code_digest, content_digest

__all__ = ["DERIVED_CACHE_FILE", "DerivedCache"]

DERIVED_CACHE_FILE = ".recompile-fix/cache/derived.json"
_FORMAT = "1"


class DerivedCache:
    """Results keyed by (kind, a file's content digest, the inputs as JSON). Entries of a file
    seen in this run with other bytes are dropped when saved; others are kept."""

    def __init__(self, root: Path, *, enabled: bool = True):
        self.path = root / DERIVED_CACHE_FILE
        self.enabled = enabled
        self.key = f"{_FORMAT}:{code_digest()}"
        self._entries: dict[str, dict[str, Any]] | None = None
        self._seen: dict[str, str] = {}  # file -> digest of its bytes in this run
        self._texts: dict[str, tuple[str, str]] = {}  # file -> (the text last hashed, its digest)
        self._dirty = False
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._entries = {}
            if self.enabled:
                try:
                    data = json.loads(self.path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    data = None
                if isinstance(data, dict) and data.get("key") == self.key and isinstance(data.get("entries"), dict):
                    self._entries = {
                        k: e
                        for k, e in data["entries"].items()
                        if isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("digest"), str)
                    }
        return self._entries

    @staticmethod
    def _entry_key(kind: str, digest: str, inputs: Any) -> str:
        text = json.dumps([kind, digest, inputs], sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()

    def get(self, kind: str, file: str, text: str, inputs: Any) -> Any | None:
        """The value stored for these inputs over ``text`` (the file's content), or None."""
        if not self.enabled:
            return None
        digest = self._digest(file, text)
        entry = self._load().get(self._entry_key(kind, digest, inputs))
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        return entry["value"]

    def put(self, kind: str, file: str, text: str, inputs: Any, value: Any) -> None:
        if not self.enabled:
            return
        digest = self._digest(file, text)
        self._load()[self._entry_key(kind, digest, inputs)] = {"file": file, "digest": digest, "value": value}
        self._dirty = True

    def _digest(self, file: str, text: str) -> str:
        known = self._texts.get(file)
        if known is not None and known[0] is text:  # asked again about the same text: hashed once
            return known[1]
        digest = content_digest(text.encode("utf-8"))
        self._seen[file] = digest
        self._texts[file] = (text, digest)
        return digest

    @property
    def changed(self) -> bool:
        """Has this run found something the cache did not hold?"""
        return self._dirty

    def save(self) -> None:
        """Atomically; a cache that cannot be written only costs the next run its speed."""
        if not self.enabled or self._entries is None:
            return
        # An entry of a file this run read with other bytes will never be asked for again.
        stale = [k for k, e in self._entries.items() if self._seen.get(e["file"], e["digest"]) != e["digest"]]
        if not self._dirty and not stale:
            return
        for key in stale:
            del self._entries[key]
        tmp = None
        try:
            make_cache_folder(self.path.parent)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".derived.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": self.key, "entries": self._entries}, fh)
            os.replace(tmp, self.path)
            tmp = None
        except OSError:
            pass
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
        self._dirty = False
