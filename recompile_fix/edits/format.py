"""Black, for the statements the tool inserts or edits and nothing else (every other byte stays),
at the project's own line length: ``line-length`` of [tool.ruff] (or ruff.toml / .ruff.toml)
or of [tool.black] in the nearest pyproject.toml above the file, else black's 88. A statement
a fix edits in place is rewrapped only in a project whose formatter is configured."""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import os
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recompile_fix.edits.edit import Edit, apply_edits

__all__ = [
    "DEFAULT_LINE_LENGTH",
    "configured_line_length",
    "format_statement",
    "line_length_of",
    "project_line_length",
    "reflow_edits",
]

DEFAULT_LINE_LENGTH = 88
_LINE_LENGTH: contextvars.ContextVar[int] = contextvars.ContextVar("line_length", default=DEFAULT_LINE_LENGTH)


def format_statement(statement: str, indent_width: int = 0, line_length: int | None = None) -> str:
    """``statement`` as black writes it, to fit ``line_length`` (default: the project's, see
    ``line_length_of``) at an indent of ``indent_width``."""
    return _format(statement, indent_width, line_length or _LINE_LENGTH.get())


@functools.lru_cache(maxsize=1024)
def _format(statement: str, indent_width: int, line_length: int) -> str:
    import black

    mode = black.Mode(line_length=max(40, line_length - indent_width))
    try:
        return black.format_str(statement, mode=mode).rstrip("\n")
    except black.InvalidInput:
        return statement


@contextlib.contextmanager
def line_length_of(path: str | os.PathLike[str] | None) -> Iterator[int | None]:
    """While inside: ``format_statement`` formats to the line length of ``path``'s project.
    Yields the length its formatter is set to, None where no formatter is configured (or
    ``path`` is None: a file whose place is not known)."""
    configured = configured_line_length(path) if path is not None else None
    token = _LINE_LENGTH.set(configured or DEFAULT_LINE_LENGTH)
    try:
        yield configured
    finally:
        _LINE_LENGTH.reset(token)


def project_line_length(path: str | os.PathLike[str]) -> int:
    """The line length the formatter of ``path``'s project is set to (88 when none is)."""
    return configured_line_length(path) or DEFAULT_LINE_LENGTH


def configured_line_length(path: str | os.PathLike[str]) -> int | None:
    """The line length of ``path``'s project's formatter: [tool.ruff] or ruff.toml, else
    [tool.black] (their default 88 when the table names none); None when neither is configured."""
    return _line_length_in(Path(os.path.abspath(path)).parent)


@functools.lru_cache(maxsize=256)
def _line_length_in(directory: Path) -> int | None:
    for folder in (directory, *directory.parents):
        for name in ("ruff.toml", ".ruff.toml"):
            length = _read(folder / name, ())
            if length is not None:
                return length
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            for table in (("tool", "ruff"), ("tool", "black")):
                length = _read(pyproject, table)
                if length is not None:
                    return length
            return None  # the project's root: no formatter configured
        if (folder / ".git").exists():
            break
    return None


def _read(file: Path, table: tuple[str, ...]) -> int | None:
    """The ``line-length`` of ``table`` in ``file``: its value, 88 where the table exists
    without one, None where there is no such table (or file)."""
    if not file.is_file():
        return None
    try:
        data: Any = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    for key in table:
        data = data.get(key) if isinstance(data, dict) else None
    if not isinstance(data, dict):
        return None
    length = data.get("line-length", DEFAULT_LINE_LENGTH)
    return length if isinstance(length, int) and 40 <= length <= 1000 else DEFAULT_LINE_LENGTH


def reflow_edits(
    text: str,
    tree: ast.Module | None,
    edits: list[Edit],
    line_length: int,
    byte_offset: Callable[[int, int], int],
) -> list[Edit]:
    """``edits`` (one fix's), where they make a simple statement that fitted ``line_length``
    (the project's formatter's: a project without one keeps its bytes, a long line included)
    overflow it (RF003's ``lr=torch.tensor(0.01, dtype=torch.float64)`` in a long line): that
    statement's edits become one edit, the statement as black writes it at that length. Only a
    statement alone on its lines and without comments, and only when black's statement parses to
    the same code; else the edits as they were."""
    if tree is None or not edits:
        return edits
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    out = list(edits)
    for statement in _simple_statements(tree):
        start = byte_offset(statement.lineno, statement.col_offset)
        end = byte_offset(statement.end_lineno, statement.end_col_offset)  # type: ignore[arg-type]
        inside = [e for e in out if start <= e.start and e.end <= end and not (e.start == e.end == start)]
        if not inside:
            continue
        first, last = offsets[statement.lineno - 1], offsets[statement.end_lineno]  # type: ignore[index]
        own = text[first:last]
        body = text[start:end]
        if "#" in own or own[: start - first].strip() or own[end - first :].strip():
            continue  # a comment, or another statement on its lines
        if max(map(len, own.splitlines())) > line_length:
            continue  # the user's lines are long already: not ours to wrap
        edited = apply_edits(body, [Edit(e.file, e.start - start, e.end - start, e.new_text, e.rule) for e in inside])
        indent = start - first
        if indent + max(map(len, edited.splitlines() or [""])) <= line_length:
            continue
        formatted = _format(edited, indent, line_length)
        try:
            same = ast.dump(ast.parse(formatted)) == ast.dump(ast.parse(edited))
        except SyntaxError:
            same = False
        if not same or formatted == edited:
            continue
        new_text = formatted.replace("\n", "\n" + own[: start - first])  # line endings: the caller's
        out = [e for e in out if e not in inside] + [Edit(inside[0].file, start, end, new_text, inside[0].rule)]
    return out


def _simple_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            yield node
