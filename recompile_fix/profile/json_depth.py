"""How deep a JSON text nests, read before it is parsed: json (and this tool) recurse, so a
Profile nested 200,000 deep would crash the reader instead of being refused."""

from __future__ import annotations

import re

__all__ = ["MAX_JSON_DEPTH", "json_depth"]

MAX_JSON_DEPTH = 64  # a Profile is 10 deep; json (and this tool) recurse, so 200,000 crash
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[][{}]')


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped), without parsing it."""
    depth = deepest = 0
    for token in _JSON_TOKEN.findall(text):
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
    return deepest
