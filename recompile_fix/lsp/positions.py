"""Character offsets <-> LSP positions (line, character in the client's encoding, UTF-16 by
default), and offsets carried through a set of Edits."""

from __future__ import annotations

import bisect
import re

from recompile_fix.edits.edit import Edit

__all__ = ["LineIndex", "Range", "code_units", "diff_edit", "map_offset"]

Range = tuple[tuple[int, int], tuple[int, int]]  # ((line, character), (line, character)), 0-based
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # LSP's line breaks (not str.splitlines's \x0c, \u2028, ...)


def code_units(text: str, encoding: str = "utf-16") -> int:
    """Length of ``text`` in the client's position encoding (LSP's default: UTF-16 code units)."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-32" or text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


class LineIndex:
    """Character offsets <-> LSP (line, character) positions for one text."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]

    def line_text(self, line: int) -> str:
        if not 0 <= line < len(self.starts):
            return ""
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[line] : end].rstrip("\r\n")

    def offset(self, line: int, column: int) -> int:
        """Offset of a (0-based line, character column) position, clamped to the line."""
        if line >= len(self.starts):
            return len(self.text)
        return self.starts[line] + min(max(column, 0), len(self.line_text(line)))

    def position(self, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
        offset = min(max(offset, 0), len(self.text))
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, code_units(self.text[self.starts[line] : offset], encoding)

    def offset_at(self, line: int, units: int, encoding: str = "utf-16") -> int:
        """Offset of an LSP position (``units`` in the client's encoding)."""
        if line >= len(self.starts):
            return len(self.text)
        text = self.line_text(line)
        count = 0
        for index, ch in enumerate(text):
            if count >= units:
                return self.starts[line] + index
            count += code_units(ch, encoding)
        return self.starts[line] + len(text)


def map_offset(edits: list[Edit], offset: int, *, after_insertions: bool) -> int:
    """Where ``offset`` of a text lies after ``edits``. An insertion at ``offset`` itself goes
    before it when ``after_insertions``; inside a replaced span, the span's start."""
    delta = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start == edit.end:
            if edit.start < offset or (edit.start == offset and after_insertions):
                delta += len(edit.new_text)
        elif edit.end <= offset:
            delta += len(edit.new_text) - (edit.end - edit.start)
        elif edit.start < offset:
            return edit.start + delta
    return offset + delta


def diff_edit(before: str, after: str) -> Edit:
    """One Edit turning ``before`` into ``after`` (common prefix and suffix kept)."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[len(before) - 1 - suffix] == after[len(after) - 1 - suffix]:
        suffix += 1
    return Edit("", prefix, len(before) - suffix, after[prefix : len(after) - suffix])
