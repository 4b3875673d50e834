"""Findings anchored to code, not bytes: a Profile's evidence in a file edited since profiling,
mapped onto the file as it is now by what it is about.

``profile`` keeps the text of each of the program's files it hashed
(``.recompile-fix/sources/<sha256>.txt``, beside the Profile). Every surface maps through
``anchor``: ``apply`` and the fix pipeline (``pipeline.fix.find``, and so ``verify``'s and
``fix``'s copies of the project, which find the texts beside the Profile they read), ``report``
and the language server (with the editor's unsaved buffer for the file's text). When a file's
bytes are no longer the profiled ones, each position the Profile names in it is found again:

* a compiled function (a frame's first line) by its qualified name, unique in both texts;
* any other position by its statement: the innermost statement holding it, keyed by its
  enclosing function's qualified name and its code (the ``ast`` dump, without positions), the
  n-th such statement in both texts; a position inside it (a call) by the same node of the
  statement's tree, so a reformatted statement maps too.

Every ``line``/``end_line``/``col``/``end_col`` and ``first_line`` of the Profile that names the
file is mapped (whatever field holds it: the Profile's JSON is walked). A frame any of whose
positions cannot be mapped with certainty is left out, with one line saying which and why; the
rest of the file's evidence applies, and the Profile copy records the file's current hash. A
file whose profiled text is not kept, or that does not parse, stays stale as before."""

from __future__ import annotations

import ast
import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recompile_fix.profile.files import read_bounded, read_named_file
from recompile_fix.profile.kept_sources import kept_source
from recompile_fix.profile.model import Frame, Profile, same_as_profiled

__all__ = ["Anchored", "anchor", "relocate"]
_RESUME_AT = re.compile(r"_at_(\d+)$")


class _Index:
    """One text's statements and functions, for finding them again."""

    def __init__(self, text: str):
        self.tree = ast.parse(text)
        self.functions: dict[str, list[ast.AST]] = {}
        self.statements: dict[tuple[str, str], list[ast.stmt]] = {}
        self.scope_of: dict[int, str] = {}
        self._walk(self.tree, "<module>")

    def _walk(self, node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                key = (scope, ast.dump(child, include_attributes=False))
                self.statements.setdefault(key, []).append(child)
                self.scope_of[id(child)] = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = child.name if scope == "<module>" else f"{scope}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    self.functions.setdefault(name, []).append(child)
                self._walk(child, name)
            else:
                self._walk(child, scope)

    def innermost(self, line: int) -> ast.stmt | None:
        best = None
        for statements in self.statements.values():
            for s in statements:
                if s.lineno <= line <= (s.end_lineno or s.lineno):
                    if best is None or (s.end_lineno or 0) - s.lineno < (best.end_lineno or 0) - best.lineno:
                        best = s
        return best

    def key_of(self, statement: ast.stmt) -> tuple[tuple[str, str], int]:
        key = (self.scope_of[id(statement)], ast.dump(statement, include_attributes=False))
        return key, next(i for i, s in enumerate(self.statements[key]) if s is statement)


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([d.lineno for d in decorators] + [node.lineno])  # type: ignore[attr-defined]


class _Mapper:
    def __init__(self, old: str, new: str):
        self.old, self.new = _Index(old), _Index(new)

    def statement(self, line: int) -> tuple[ast.stmt, ast.stmt] | None:
        before = self.old.innermost(line)
        if before is None:
            return None
        key, n = self.old.key_of(before)
        after = self.new.statements.get(key, [])
        if len(after) != len(self.old.statements[key]):
            return None  # as many such statements in both, or the n-th is not certain
        return before, after[n]

    def position(self, line: int, col: int | None, end_line: int | None, end_col: int | None):
        pair = self.statement(line)
        if pair is None:
            return None
        before, after = pair
        if col is None:
            if line == before.lineno:
                return after.lineno, None, None if end_line is None else after.end_lineno, None
            return None
        old_nodes, new_nodes = list(ast.walk(before)), list(ast.walk(after))
        for i, node in enumerate(old_nodes):
            if getattr(node, "lineno", None) == line and getattr(node, "col_offset", None) == col:
                if end_line is not None and getattr(node, "end_lineno", None) != end_line:
                    continue
                if end_col is not None and getattr(node, "end_col_offset", None) != end_col:
                    continue
                twin = new_nodes[i]
                return (
                    twin.lineno,  # type: ignore[attr-defined]
                    twin.col_offset,  # type: ignore[attr-defined]
                    None if end_line is None else twin.end_lineno,  # type: ignore[attr-defined]
                    None if end_col is None else twin.end_col_offset,  # type: ignore[attr-defined]
                )
        return None

    def describe(self, line: int) -> str:
        """The profiled statement at ``line``, short."""
        statement = self.old.innermost(line)
        if statement is None:
            return "the profiled line"
        text = " ".join(ast.unparse(statement).split())
        return f"`{text if len(text) <= 60 else text[:59] + chr(0x2026)}`"

    def function(self, first_line: int, name: str) -> int | None:
        for qualname, nodes in self.old.functions.items():
            for node in nodes:
                if _first_line(node) == first_line and node.name == name:  # type: ignore[attr-defined]
                    if len(nodes) != 1 or len(self.new.functions.get(qualname, [])) != 1:
                        return None
                    return _first_line(self.new.functions[qualname][0])
        return None


@dataclass
class Anchored:
    """A Profile's evidence mapped onto the files as they are now (``anchor``)."""

    profile: Profile  # a copy whose evidence names the code where it is now; stale frames left out
    notes: list[str] = field(default_factory=list)  # one line per frame left out as stale
    stale: list[Frame] = field(default_factory=list)  # those frames, as the Profile recorded them
    moved: set[str] = field(default_factory=set)  # the files whose evidence was mapped


def anchor(
    profile: Profile,
    root: Path,
    profile_path: Path | None = None,
    texts: Mapping[str, str] | None = None,
) -> Anchored:
    """Map ``profile``'s evidence in edited files onto them as they are now (module docstring).

    The profiled texts are those kept beside the file the Profile was read from
    (``Profile.origin``), else beside ``profile_path``. ``texts``: a file's current text where it
    is not the one on disk (an editor's unsaved buffer), by the Profile's path."""
    where = profile.origin or profile_path
    texts = texts or {}
    moved: dict[str, tuple[_Mapper, str]] = {}
    for path, digest in profile.sources.items():
        if path.startswith("/") or Path(path).is_absolute():
            continue
        try:
            raw = texts[path].encode("utf-8") if path in texts else read_named_file(path, root)
        except OSError:
            continue
        now = hashlib.sha256(raw).hexdigest()
        if same_as_profiled(raw, digest) or profile.applied.get(path) == now or where is None:
            continue
        kept = kept_source(where, digest)
        try:
            moved[path] = (_Mapper(read_bounded(kept).decode("utf-8"), raw.decode("utf-8")), now)
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            continue  # no profiled text, or a file that does not parse: stale as before
    if not moved:
        return Anchored(profile)
    data: dict[str, Any] = profile.to_json()
    result = Anchored(profile, moved=set(moved))
    frames = []
    for index, frame in enumerate(data.get("frames", [])):
        failed = _map_frame(frame, moved)
        if failed is None:
            frames.append(frame)
        else:
            result.notes.append(failed)
            result.stale.append(profile.frames[index])
    data["frames"] = frames
    for path, (_, now) in moved.items():
        data["sources"][path] = now
    relocated = Profile.from_json(copy.deepcopy(data))
    relocated.applied = dict(profile.applied)
    relocated.origin = profile.origin
    result.profile = relocated
    return result


def relocate(
    profile: Profile,
    root: Path,
    profile_path: Path | None = None,
    texts: Mapping[str, str] | None = None,
) -> tuple[Profile, list[str]]:
    """A copy of ``profile`` whose evidence in edited files names the code where it is now
    (``anchor``), and one line for each frame left out as stale."""
    anchored = anchor(profile, root, profile_path, texts)
    return anchored.profile, anchored.notes


def _map_frame(frame: dict, moved: dict[str, tuple[_Mapper, str]]) -> str | None:
    """Map the frame's positions in place; why not, when one of them cannot be."""
    name = frame.get("name", "?")
    if frame.get("file") in moved:
        mapper = moved[frame["file"]][0]
        match = _RESUME_AT.search(name)
        if frame.get("first_line") not in (None, 1) or name != "<module>":
            base = name[: match.start()] if match else name
            line = mapper.function(frame["first_line"], base.split("torch_dynamo_resume_in_")[-1])
            if line is None and not match:
                return f"{frame['file']}:{frame['first_line']}: `{name}`: its function changed since profiling; stale"
            if line is not None:
                frame["first_line"] = line
        if match:
            at = mapper.position(int(match.group(1)), None, None, None)
            if at is None:
                return f"{frame['file']}: `{name}`: the statement it resumes at changed since profiling; stale"
            frame["name"] = f"{name[: match.start()]}_at_{at[0]}"
    failure: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            file = value.get("file")
            if file in moved and isinstance(value.get("line"), int):
                mapped = moved[file][0].position(
                    value["line"], value.get("col"), value.get("end_line"), value.get("end_col")
                )
                if mapped is None:
                    failure.append(f"{file}:{value['line']}: {moved[file][0].describe(value['line'])}")
                else:
                    value["line"] = mapped[0]
                    for key, new in zip(("col", "end_line", "end_col"), mapped[1:]):
                        if key in value:
                            value[key] = new
            for key, child in value.items():
                if key != "first_line" or value is not frame:
                    walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    walk({k: v for k, v in frame.items() if k not in ("file", "first_line", "name")})
    if failure:
        return f"{failure[0]} changed since profiling: the evidence of `{name}` there is stale, not fixed"
    return None
