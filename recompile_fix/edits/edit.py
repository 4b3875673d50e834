"""Edits: the last stage of the flow. An Edit replaces one span of one file with new text; the
command line, the diff and the editor all consume the same Edits."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["apply_edits", "Edit", "unified_diff"]


@dataclass(frozen=True)
class Edit:
    file: str
    start: int  # character offsets into the file's text
    end: int
    new_text: str
    rule: str = ""

    def overlaps(self, other: "Edit") -> bool:
        if self.start == self.end == other.start == other.end:
            return False  # two insertions at one point compose (in order)
        return self.start < other.end and other.start < self.end


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits; insertions at the same point keep their order."""
    ordered = sorted(enumerate(edits), key=lambda item: (item[1].start, item[1].end, item[0]))
    out, cursor = [], 0
    for _, edit in ordered:
        if edit.start < cursor:
            raise ValueError(f"overlapping edits at offset {edit.start}")
        out.append(text[cursor : edit.start])
        out.append(edit.new_text)
        cursor = edit.end
    out.append(text[cursor:])
    return "".join(out)


def unified_diff(path: str, before: str, after: str) -> str:
    """The change as `git diff` shows it; a last line without a line break is marked so
    (``\\ No newline at end of file``), as `patch` reads it, not run into the next line."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return "".join(line if line.endswith(("\n", "\r")) else f"{line}\n\\ No newline at end of file\n" for line in lines)
