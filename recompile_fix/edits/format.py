"""Black, for the statements the tool inserts and nothing else (every other byte stays)."""

from __future__ import annotations

import functools

__all__ = ["format_statement"]


@functools.lru_cache(maxsize=1024)
def format_statement(statement: str, indent_width: int = 0, line_length: int = 88) -> str:
    import black

    mode = black.Mode(line_length=max(40, line_length - indent_width))
    try:
        return black.format_str(statement, mode=mode).rstrip("\n")
    except black.InvalidInput:
        return statement
