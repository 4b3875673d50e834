"""The digest of the tool's own source, the key every cache of derived results carries. Standard
library only: the language server checks it before anything else has loaded (lsp/first_open)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from pathlib import Path

import recompile_fix

__all__ = ["code_digest"]


@functools.cache
def code_digest() -> str:
    """A digest of the tool's own source (engine and rules), so a cached result never outlives
    the code that computed it: an editable install changes without a version bump. Once per
    process: the code that runs is the code imported (a language server edited under it keeps
    running the old code, so keeps its old key); it read every file of the tool on every apply.
    The rules' folder is found, not imported (importing them loads libcst: 0.2 s)."""
    spec = importlib.util.find_spec("recompile_fix.rules")
    rules = Path(next(iter(spec.submodule_search_locations or []))) if spec else None
    digest = hashlib.blake2b(digest_size=8)
    for package in (Path(recompile_fix.__file__).parent, rules):
        if package is None:
            continue
        # Every stage folder; os.walk does not follow the link that puts rules/ in the package.
        for directory, _, filenames in sorted(os.walk(package)):
            for name in sorted(f for f in filenames if f.endswith(".py")):
                path = Path(directory, name)
                digest.update(str(path.relative_to(package)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()
