"""Jupyter notebooks (``.ipynb``) as one Python text, and edits of that text written back to cells.

The rules see a notebook as one Python file: its code cells in order, each after a marker line
(``# %% [cell 3]``, the cell's 1-based index among all the notebook's cells), with what is not
Python commented out (a cell magic's whole cell, a line magic or ``!shell`` line become
``# [ipython] !pip list``; ``%time step()`` keeps its code). `profile` runs that text (``notebook_script``, with the notebook's
folder as the working directory and first import path, as Jupyter runs it) and the Profile names
the notebook and lines of that text; `apply` maps the rewritten text back onto the cells it
changed (``Notebook.rewritten``): only their ``source`` changes, outputs and metadata keep their
bytes, and the JSON keeps its indent and key order.

Standard library only (the recorder's process imports nothing of it, but the Profile stage does).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from recompile_fix.errors import UserError

__all__ = [
    "NOTEBOOK_SUFFIX",
    "Notebook",
    "NotebookError",
    "cell_diffs",
    "cell_location",
    "display_location",
    "is_notebook",
    "notebook_script",
    "source_bytes",
    "source_of",
    "split_cells",
]

NOTEBOOK_SUFFIX = ".ipynb"
_MARKER = re.compile(r"^# %% \[cell (\d+)\]\r?\n?$")
# IPython syntax on a line: a line magic, a shell line, or one assigned (`files = !ls`).
_MAGIC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.,\s]*=\s*)?[%!]")
_HIDDEN = re.compile(r"^(\s*)# \[ipython\](?: (.*))?$")
_MAGIC_TAG = "# [ipython]"
# Magics that run the Python they are given, once (as far as recompiles go): their code runs and
# the rules read it; only the magic's name is set aside (``step()  # [ipython] %time``).
_RUNS_PYTHON = ("time", "timeit", "prun", "capture")
_TIMED_LINE = re.compile(r"^(\s*)(%(?:" + "|".join(_RUNS_PYTHON) + r")) (\S.*?\S|\S)$")
_TIMED = re.compile(r"^(\s*)(.*?\S)  # \[ipython\] (%\w+)$")


class NotebookError(UserError):
    """A notebook that is not JSON, not nbformat 4, or cannot be mapped: one line, not changed."""


def is_notebook(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith(NOTEBOOK_SUFFIX)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _hide(line: str) -> str:
    """A line of IPython syntax as a comment the rules read past (and ``_show`` restores)."""
    end = line[len(line.rstrip("\r\n")) :]
    body = line[: len(line) - len(end)]
    indent = body[: len(body) - len(body.lstrip())]
    rest = body[len(indent) :]
    return f"{indent}{_MAGIC_TAG} {rest}{end}" if rest else f"{indent}{_MAGIC_TAG}{end}"


def _as_code(line: str) -> str | None:
    """``%time step()`` as ``step()  # [ipython] %time`` (its code runs), or None."""
    end = line[len(line.rstrip("\r\n")) :]
    match = _TIMED_LINE.match(line[: len(line) - len(end)])
    return None if match is None else f"{match[1]}{match[3]}  {_MAGIC_TAG} {match[2]}{end}"


def _show(line: str) -> str:
    end = line[len(line.rstrip("\r\n")) :]
    body = line[: len(line) - len(end)]
    timed = _TIMED.match(body)
    if timed is not None:
        return f"{timed[1]}{timed[3]} {timed[2]}{end}"
    match = _HIDDEN.match(body)
    if match is None:
        return line
    return f"{match[1]}{match[2] or ''}{end}"


class Notebook:
    """One notebook: its JSON (keys in their order) and its code cells as one Python text."""

    def __init__(self, path: str | os.PathLike[str], data: bytes):
        self.path = str(path)
        self.data = data
        try:
            self.raw = data.decode("utf-8")
            self.json = json.loads(self.raw)
        except UnicodeDecodeError as exc:
            raise NotebookError(f"{self.path}: not UTF-8 (byte {exc.start}); not changed") from None
        except json.JSONDecodeError as exc:
            raise NotebookError(
                f"{self.path}: not a notebook (not JSON: {exc.msg} at line {exc.lineno}); not changed"
            ) from None
        cells = self.json.get("cells") if isinstance(self.json, dict) else None
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            raise NotebookError(f"{self.path}: not a notebook (no list of cells; nbformat 4 is read); not changed")
        self.cells: list[dict[str, Any]] = cells
        self.code: list[int] = []  # indexes (0-based) of the code cells, in order
        self.sources: dict[int, str] = {}
        parts: list[str] = []
        # Another kernel's notebook (R, Julia) has no Python to read: its text is empty.
        metadata = self.json.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        language = (metadata.get("language_info") or {}).get("name") or (metadata.get("kernelspec") or {}).get(
            "language"
        )
        self.python = not isinstance(language, str) or language.lower() in ("python", "python3", "ipython")
        for index, cell in enumerate(cells):
            if cell.get("cell_type") != "code" or not self.python:
                continue
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(s, str) for s in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise NotebookError(f"{self.path}: cell {index + 1}'s source is not text; not changed")
            for line in _lines(source):
                if _MARKER.match(line) or _MAGIC_TAG in line:
                    raise NotebookError(
                        f"{self.path}: cell {index + 1} holds the line {line.strip()!r}, which recompile-fix "
                        "uses to map cells; not changed"
                    )
            self.code.append(index)
            self.sources[index] = source
            parts.append(f"# %% [cell {index + 1}]\n")
            parts.append(self._as_python(source))
        self.text = "".join(parts)

    @staticmethod
    def _as_python(source: str) -> str:
        """A cell's source as Python: a cell magic's line set aside (its whole cell, unless the
        magic runs the cell's Python: ``%%time``), line magics and shell lines likewise."""
        lines = _lines(source)
        out = []
        cell_magic = bool(lines) and lines[0].startswith("%%")
        python_body = cell_magic and lines[0][2:].split(maxsplit=1)[:1] in ([name] for name in _RUNS_PYTHON)
        for number, line in enumerate(lines):
            if cell_magic and (number == 0 or not python_body):
                out.append(_hide(line))
            elif _MAGIC_LINE.match(line):
                out.append(_as_code(line) or _hide(line))
            else:
                out.append(line)
        text = "".join(out)
        return text if not text or text.endswith(("\n", "\r")) else text + "\n"

    # -- locations ------------------------------------------------------------------------------
    def cell_starts(self) -> list[tuple[int, int]]:
        """(line of the text where the cell's first line is, the cell's 1-based index)."""
        starts = []
        for number, line in enumerate(_lines(self.text), start=1):
            match = _MARKER.match(line)
            if match:
                starts.append((number + 1, int(match[1])))
        return starts

    # -- writing back ---------------------------------------------------------------------------
    def split(self, text: str) -> dict[int, str]:
        """The cells' sources (by 0-based index) a rewritten text holds; what an edit put before
        the first marker (an import) goes to the first code cell."""
        chunks = split_cells(text)
        if [cell - 1 for cell, _ in chunks[1:]] != self.code:
            raise NotebookError(f"{self.path}: a fix moved a cell boundary; not changed")
        sources = {cell - 1: source for cell, source in chunks[1:]}
        if chunks[0][1] and self.code:
            sources[self.code[0]] = chunks[0][1] + sources[self.code[0]]
        for index, source in sources.items():
            original = self.sources[index]
            if source.endswith("\n") and not original.endswith(("\n", "\r")):
                source = source[:-1]  # the cell's last line had no line end: it keeps none
            sources[index] = source
        return sources

    def changed_cells(self, text: str) -> list[tuple[int, str, str]]:
        """(1-based cell index, source before, source after) of each cell ``text`` changes."""
        return [
            (index + 1, self.sources[index], source)
            for index, source in self.split(text).items()
            if source != self.sources[index]
        ]

    def rewritten(self, text: str) -> bytes:
        """The notebook's bytes with the cells ``text`` changed rewritten (their ``source`` only,
        a list of lines where it was one); every other byte as it was."""
        changed = {index - 1: after for index, _, after in self.changed_cells(text)}
        if not changed:
            return self.data
        dump = self._dumper()
        for index, after in changed.items():
            cell = self.cells[index]
            cell["source"] = _lines(after) if isinstance(cell.get("source"), list) else after
        try:
            return dump(self.json).encode("utf-8")
        finally:
            for index in changed:
                original = self.sources[index]
                cell = self.cells[index]
                cell["source"] = _lines(original) if isinstance(cell["source"], list) else original

    def _dumper(self):
        """How the notebook was written (nbformat: indent 1, non-ASCII as is, a final newline),
        checked by writing the notebook as it is and getting its bytes back."""
        ending = self.raw[len(self.raw.rstrip()) :]
        match = re.search(r"\n([ \t]+)\S", self.raw)
        indent: int | str | None = None if match is None else match[1]
        if isinstance(indent, str) and set(indent) == {" "}:
            indent = len(indent)
        for ensure_ascii in (False, True):

            def dump(value: Any, ensure_ascii: bool = ensure_ascii) -> str:
                separators = (",", ": ") if indent is not None else (", ", ": ")
                text = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, separators=separators)
                return text + ending

            if dump(self.json) == self.raw:
                return dump
        raise NotebookError(
            f"{self.path}: its JSON is not laid out as Jupyter writes it (indent, key order), so a rewrite "
            "would change bytes outside the cells; not changed (save it from Jupyter once)"
        )


def split_cells(text: str) -> list[tuple[int, str]]:
    """A notebook's text as (1-based cell index, the cell's source as the notebook holds it,
    magics restored), after (0, what precedes the first marker)."""
    chunks: list[tuple[int, list[str]]] = [(0, [])]
    for line in _lines(text):
        match = _MARKER.match(line)
        if match:
            chunks.append((int(match[1]), []))
        else:
            chunks[-1][1].append(_show(line))
    return [(cell, "".join(lines)) for cell, lines in chunks]


def cell_diffs(before: str, after: str) -> list[tuple[int, str, str]]:
    """(1-based cell index, before, after) of each cell two texts of a notebook differ in (what an
    edit put before the first marker counts to the first cell)."""
    old, new = split_cells(before), split_cells(after)
    if [c for c, _ in old] != [c for c, _ in new]:
        return [(old[1][0] if len(old) > 1 else 1, before, after)]
    changed = []
    for index, ((cell, a), (_, b)) in enumerate(zip(old, new)):
        if index == 1:
            a, b = old[0][1] + a, new[0][1] + b
        if a != b and index > 0:
            changed.append((cell, a, b))
    return changed


def source_of(path: str | os.PathLike[str], data: bytes) -> bytes:
    """What the rules read of a file with these bytes: the bytes themselves, or a notebook's
    code cells as one Python text (UTF-8)."""
    if not is_notebook(path):
        return data
    return Notebook(path, data).text.encode("utf-8")


def source_bytes(path: str | os.PathLike[str]) -> bytes:
    """``source_of`` the file on disk (OSError when it cannot be read; NotebookError for a
    notebook that is not one)."""
    return source_of(path, Path(path).read_bytes())


def cell_location(path: str | os.PathLike[str], line: int) -> tuple[int, int] | None:
    """(1-based cell index, line in the cell) of a line of a notebook's text (a path relative to
    here); None when the file is not a notebook or cannot be read."""
    if not is_notebook(path):
        return None
    try:
        st = os.stat(path)
        starts = _cell_starts(str(path), st.st_mtime_ns, st.st_size)
    except (OSError, UserError):
        return None
    found = None
    for start, cell in starts:
        if start <= line:
            found = (cell, line - start + 1)
        elif start - 1 == line:
            return None
    return found


@functools.lru_cache(maxsize=64)
def _cell_starts(path: str, _mtime: int, _size: int) -> tuple[tuple[int, int], ...]:
    return tuple(Notebook(path, Path(path).read_bytes()).cell_starts())


def display_location(path: str, line: int) -> str:
    """``path:line``, or for a notebook ``nb.ipynb:cell 3:line`` (the line in the cell), as ruff
    names a notebook's lines."""
    where = cell_location(path, line)
    return f"{path}:{line}" if where is None else f"{path}:cell {where[0]}:{where[1]}"


def notebook_script(notebook: Notebook) -> str:
    """The text `profile` runs: the notebook's text, with its first line (the first marker)
    replaced by what Jupyter does first (the notebook's folder as the working directory and the
    first import path), so every line keeps its number."""
    folder = os.path.dirname(os.path.abspath(notebook.path))
    lines = _lines(notebook.text)
    if not lines:
        return ""
    lines[0] = (
        f"__import__('sys').path.insert(0, {folder!r}); __import__('os').chdir({folder!r}); "
        "__import__('builtins').__dict__.setdefault('display', print)  # recompile-fix: as Jupyter runs it\n"
    )
    return "".join(lines)
