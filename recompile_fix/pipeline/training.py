"""Which files of the project run a backward pass: a training script beside the file a Finding is
in, which neither the Profile nor that file shows (``settle`` asks it for RF004's fix).

Read by text, never parsed (a parse of every file would cost a warm run its cache). What one
file says (``training_fact``) is a pure function of its bytes: the static scan works it out for
each file it reads and keeps it in its cache, so a warm run reads no file for it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from recompile_fix.pipeline.paths import discover, relative_to

__all__ = ["TrainingFact", "TrainingInProject", "training_fact"]

# What one file's text says (``training_fact``), as JSON: None, or [call, line, imported names].
TrainingFact = list[Any] | None

# A backward pass, as text: `loss.backward()`, `torch.autograd.backward(...)`, `autograd.grad(...)`.
# Two patterns, each with a literal start (one alternation of both took 1.9 s over 45 MB).
_BACKWARD = (re.compile(rb"\.backward\s*\("), re.compile(rb"autograd\.(?:backward|grad)\s*\("))


_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w., \t]+))", re.M)


def _imported_names(data: bytes) -> list[str]:
    """Every dotted part of every module a file's text imports (`from pkg.model import GPT`:
    pkg, model; `import a.b as c, d`: a, b, d), sorted."""
    names: set[str] = set()
    for match in _IMPORT.finditer(data):
        text = (match.group(1) or match.group(2) or b"").decode(errors="replace")
        for item in text.split(","):
            module = item.strip().split(" ")[0]
            names.update(part for part in module.split(".") if part)
    return sorted(names)


def training_fact(data: bytes) -> TrainingFact:
    """What a file's bytes say for the search: None where they run no backward pass, else (its
    first backward call's line, as text, with its line number; the names it imports)."""
    found = [m for m in (pattern.search(data) for pattern in _BACKWARD) if m is not None]
    if not found:
        return None
    match = min(found, key=lambda m: m.start())
    start = data.rfind(b"\n", 0, match.start()) + 1
    end = data.find(b"\n", match.start())
    call = data[start : end if end >= 0 else len(data)].decode(errors="replace").strip()
    line = data.count(b"\n", 0, match.start()) + 1
    return [call, line, _imported_names(data)]


class _Reader(Protocol):
    texts: Mapping[str, str]

    def peek(self, path: str) -> bytes: ...


class TrainingInProject:
    """Where a Python file of the project (``root``, less what the configuration excludes) that
    imports a given module runs a backward pass. Searched once, on the first ask; ``known``: what
    the static scan read of files on disk, by relative path (an editor's buffer is read anew);
    ``walks``: the folders it walked."""

    def __init__(
        self,
        root: Path,
        excluded: Callable[[str], bool],
        files: _Reader,
        known: Mapping[str, TrainingFact] | None = None,
        walks: dict[Path, list[Path]] | None = None,
    ):
        self.root, self.excluded, self.files = root, excluded, files
        self.known: Mapping[str, TrainingFact] = known or {}
        self.walks = walks  # the folders the scan walked (``discover``)
        self._trainers: list[tuple[str, frozenset[str], str]] | None = None  # (file, modules it imports, the call)

    def _scan(self) -> list[tuple[str, frozenset[str], str]]:
        if self._trainers is None:
            self._trainers = []
            for path in discover([str(self.root)], self.root, self.excluded, self.walks):
                if path.suffix != ".py":
                    continue
                relative = relative_to(path, self.root)
                if relative in self.known and relative not in self.files.texts:
                    fact = self.known[relative]
                else:
                    try:
                        fact = training_fact(self.files.peek(relative))
                    except OSError:
                        continue
                if fact is not None:
                    call, line, imported = fact
                    self._trainers.append((relative, frozenset(imported), f"`{call}` at {relative}:{line}"))
        return self._trainers

    def of(self, path: str) -> str | None:
        """The first training file that imports ``path``'s module (``import model``, ``from
        model import GPT``, ``from .model import``, ``from pkg.model import``), or None."""
        module = Path(path).stem
        for relative, imported, where in self._scan():
            if module in imported and os.path.normpath(relative) != os.path.normpath(path):
                return where
        return None
