"""A loaded Profile is checked before anything reads it: a damaged or hand-edited one is one line
and exit code 2, never a traceback, and never edits other than the run it records would give.

* Shape: every field has its type (an int is not a bool or a string, a list is a list), lines
  are >= 1, columns >= 0, spans end after they start, numbers are finite, hashes are sha256.
* Inner agreement: what torch recorded twice must agree. A typed guard failure (kind, source,
  dimension, expected and actual size) is what its own text says; a dimension lies within the
  rank recorded for its tensor; the sizes a size guard names are the ones recorded at the two
  compiles it compares.
* The project (``check_against_sources``, once files are at hand): a relative path stays inside
  the project; a span in a file whose bytes are the ones profiled lies inside that file.
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections.abc import Callable
from typing import Any

from recompile_fix.errors import UserError
from recompile_fix.profile.model import REASON_KINDS, Location, Profile, same_as_profiled
from recompile_fix.profile.reasons import parse_reasons
from recompile_fix.profile.resume import is_resume

__all__ = ["check_against_sources", "validate_profile_json"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CODE_NAME = re.compile(r"[^\W\d]\w*|<\w+>")  # a def's name, or <module>, <lambda>, <genexpr> ...
_MAX_LINE = 10_000_000  # no source file has more lines
_MAX_DIM = 64  # torch's own limit on a tensor's rank


class _Invalid(Exception):
    pass


def validate_profile_json(data: Any) -> None:
    """Raise UserError (one line) unless ``data`` is a well-formed, self-consistent Profile."""
    try:
        _check_profile(data)
    except _Invalid as exc:
        raise UserError(f"damaged Profile: {exc}; profile the program again") from None


def check_against_sources(profile: Profile, read: Callable[[str], bytes | None]) -> None:
    """Raise UserError when the Profile does not fit the files whose bytes are the ones it
    profiled (``read``: Profile path -> the file's bytes, None when unreadable): a relative path
    leaves the project, a compiled frame names no ``def`` there, a recorded span is not the span
    of an expression or statement of the file (CPython records node spans), or a line without
    a span lies past the end."""
    files: dict[str, _File | None] = {}

    def file_of(path: str) -> _File | None:
        if path not in files:
            files[path] = None
            data = read(path)
            if data is not None and same_as_profiled(data, profile.sources.get(path)):
                files[path] = _File.parse(data)
        return files[path]

    def damaged(what: str) -> UserError:
        return UserError(f"damaged Profile: {what}; profile the program again")

    def check(location: Location, what: str) -> None:
        file = file_of(location.file)
        if file is None:
            return
        if location.line > max(len(file.lines), 1):
            raise damaged(f"{what} names line {location.line} of {location.file}, which has {len(file.lines)} lines")
        span = (location.line, location.col, location.end_line, location.end_col)
        if file.spans is not None and None not in span and span not in file.spans:
            raise damaged(f"{what} names {location.file}:{location.line}:{location.col}, no expression there")

    for path in list(profile.sources) + list(profile.applied):
        _check_inside(path)
    for frame in profile.frames:
        _check_inside(frame.file)
        file = file_of(frame.file)
        if file is not None and file.defs is not None and frame.name.isidentifier() and not is_resume(frame.name):
            if (frame.first_line, frame.name) not in file.defs:
                raise damaged(f"frame `{frame.name}` names line {frame.first_line} of {frame.file}: no such def there")
        for compile_ in frame.compiles:
            for location in compile_.stack:
                _check_inside(location.file)
                check(location, f"compile {compile_.id} of `{frame.name}`")
        for graph_break in frame.graph_breaks:
            check(graph_break.location, f"a graph break in `{frame.name}`")


class _File:
    """A profiled file's lines, and (when it parses) its node spans and defs."""

    def __init__(self, lines: list[str], tree: ast.Module | None):
        self.lines = lines
        self.spans: set[tuple[int, int, int, int]] | None = None
        self.defs: set[tuple[int, str]] | None = None
        if tree is not None:
            self.spans = set()
            self.defs = set()
            for node in ast.walk(tree):
                if isinstance(node, (ast.expr, ast.stmt)):
                    self.spans.add((node.lineno, node.col_offset, node.end_lineno or 0, node.end_col_offset or 0))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    # co_firstlineno is the first decorator's line, else the def's
                    for line in [node.lineno, *(d.lineno for d in node.decorator_list)]:
                        self.defs.add((line, node.name))

    @classmethod
    def parse(cls, data: bytes) -> "_File | None":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        bom = text.startswith("\ufeff")
        try:
            tree = ast.parse(text[1:] if bom else text)
        except (SyntaxError, ValueError):
            tree = None
        if bom and tree is not None:  # columns of line 1 count the mark's three bytes, as CPython's do
            for node in ast.walk(tree):
                if getattr(node, "lineno", None) == 1:
                    node.col_offset += 3  # type: ignore[attr-defined]
                if getattr(node, "end_lineno", None) == 1:
                    node.end_col_offset += 3  # type: ignore[attr-defined]
        return cls(text.splitlines(), tree)


def _check_inside(path: str) -> None:
    if not os.path.isabs(path) and os.path.normpath(path).split(os.sep)[0] == "..":
        raise UserError(f"damaged Profile: the path {path!r} leaves the project; profile the program again")


# -- shape ------------------------------------------------------------------------------------------
def _fail(where: str, what: str) -> None:
    raise _Invalid(f"{where} {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any, where: str, low: int = 0, high: int = 2**62, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not _is_int(value):
        _fail(where, f"is {value!r}, not an integer")
    if not low <= value <= high:
        _fail(where, f"is {value}, outside {low}..{high}")


def _str(value: Any, where: str, optional: bool = False, empty: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or (not empty and not value):
        _fail(where, f"is {value!r}, not a{'' if empty else ' non-empty'} string")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(where, f"is {type(value).__name__}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        _fail(where, f"is {type(value).__name__}, not a list")
    return value


def _scalar(value: Any, where: str) -> None:
    """A guard's value: a JSON scalar, or a list or object of them (finite numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        _fail(where, f"is {value!r}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            _scalar(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _scalar(item, f"{where}.{key}")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        _fail(where, f"is {value!r}")


def _location(value: Any, where: str) -> None:
    data = _obj(value, where)
    _str(data.get("file"), f"{where}.file", empty=False)
    _int(data.get("line"), f"{where}.line", 1, _MAX_LINE)
    _int(data.get("end_line"), f"{where}.end_line", data["line"], _MAX_LINE, optional=True)
    _int(data.get("col"), f"{where}.col", 0, 100_000, optional=True)
    _int(data.get("end_col"), f"{where}.end_col", 0, 100_000, optional=True)
    _str(data.get("function"), f"{where}.function", optional=True)
    if (
        data.get("col") is not None
        and data.get("end_col") is not None
        and data.get("end_line") in (None, data["line"])
        and data["end_col"] < data["col"]
    ):
        _fail(where, f"ends (column {data['end_col']}) before it starts (column {data['col']})")


def _check_profile(data: Any) -> None:
    top = _obj(data, "the Profile")
    command = _list(top.get("command"), "command")
    for i, arg in enumerate(command):
        _str(arg, f"command[{i}]")
    _str(top.get("torch_version"), "torch_version", optional=True)
    _str(top.get("python_version", ""), "python_version")
    _str(top.get("tool_version"), "tool_version", optional=True)
    _str(top.get("backend"), "backend", optional=True)
    _int(top.get("exit_code"), "exit_code", -(2**31), 2**31, optional=True)
    for key in ("sources", "applied"):
        for path, digest in _obj(top.get(key, {}), key).items():
            _str(path, f"{key} key", empty=False)
            if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
                _fail(f"{key}[{path!r}]", f"is {digest!r}, not a sha256 digest")
    for i, process in enumerate(_list(top.get("processes", []), "processes")):
        _obj(process, f"processes[{i}]")
    sources = top.get("sources", {})
    for f, frame in enumerate(_list(top.get("frames"), "frames")):
        _check_frame(_obj(frame, f"frames[{f}]"), f"frames[{f}]")
        named = [frame["file"]] + [s["file"] for c in frame.get("compiles", []) for s in c.get("stack", [])]
        for path in named:
            if path not in sources:
                _fail(f"frames[{f}]", f"names the file {path!r}, of which it records no hash")


def _check_frame(frame: dict[str, Any], where: str) -> None:
    _str(frame.get("file"), f"{where}.file", empty=False)
    _int(frame.get("first_line"), f"{where}.first_line", 1, _MAX_LINE)
    _str(frame.get("name"), f"{where}.name", empty=False)
    if not _CODE_NAME.fullmatch(frame["name"]):
        _fail(f"{where}.name", f"is {frame['name']!r}, not the name of a function")
    compiles = [
        _obj(c, f"{where}.compiles[{i}]") for i, c in enumerate(_list(frame.get("compiles", []), f"{where}.compiles"))
    ]
    ids: dict[str, dict[str, Any]] = {}
    for i, compile_ in enumerate(compiles):
        here = f"{where}.compiles[{i}]"
        _str(compile_.get("id"), f"{here}.id", empty=False)
        ids.setdefault(compile_["id"], compile_)
        for j, location in enumerate(_list(compile_.get("stack", []), f"{here}.stack")):
            _location(location, f"{here}.stack[{j}]")
        for key, seconds in _obj(compile_.get("seconds", {}), f"{here}.seconds").items():
            if seconds is not None and (
                not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds)
            ):
                _fail(f"{here}.seconds.{key}", f"is {seconds!r}, not a number of seconds")
            if isinstance(seconds, (int, float)) and seconds < 0:
                _fail(f"{here}.seconds.{key}", f"is {seconds}, below zero")
        for name, entry in _obj(compile_.get("inputs", {}), f"{here}.inputs").items():
            _check_input(_obj(entry, f"{here}.inputs[{name!r}]"), f"{here}.inputs[{name!r}]")
        _str(compile_.get("fail_type"), f"{here}.fail_type", optional=True)
        _str(compile_.get("fail_reason"), f"{here}.fail_reason", optional=True)
        if not isinstance(compile_.get("limit_hit", False), bool):
            _fail(f"{here}.limit_hit", f"is {compile_.get('limit_hit')!r}, not true or false")
        _int(compile_.get("rank"), f"{here}.rank", 0, 2**20, optional=True)
        for j, reason in enumerate(_list(compile_.get("reasons", []), f"{here}.reasons")):
            _check_reason(_obj(reason, f"{here}.reasons[{j}]"), f"{here}.reasons[{j}]")
    for i, graph_break in enumerate(_list(frame.get("graph_breaks", []), f"{where}.graph_breaks")):
        data = _obj(graph_break, f"{where}.graph_breaks[{i}]")
        _location(data.get("location"), f"{where}.graph_breaks[{i}].location")
        _str(data.get("reason", ""), f"{where}.graph_breaks[{i}].reason")
        _int(data.get("count", 1), f"{where}.graph_breaks[{i}].count", 1)
    _check_agreement(compiles, ids, where)


def _check_input(entry: dict[str, Any], where: str) -> None:
    _str(entry.get("type"), f"{where}.type", empty=False)
    if entry["type"] == "Tensor":
        for key in ("shape", "stride"):
            if key in entry:
                values = _list(entry[key], f"{where}.{key}")
                if len(values) > _MAX_DIM:
                    _fail(f"{where}.{key}", f"has {len(values)} dimensions")
                for d, size in enumerate(values):
                    _int(size, f"{where}.{key}[{d}]", 0 if key == "shape" else -(2**62))
        _str(entry.get("dtype"), f"{where}.dtype", optional=True)
    elif entry["type"] in ("int", "float", "bool"):
        value = entry.get("value")
        expected: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,)}
        if not isinstance(value, expected[entry["type"]]) or (entry["type"] != "bool" and isinstance(value, bool)):
            _fail(f"{where}.value", f"is {value!r}, not a{'n' if entry['type'] == 'int' else ''} {entry['type']}")
        if isinstance(value, float) and not math.isfinite(value):
            _fail(f"{where}.value", f"is {value!r}")


def _check_reason(reason: dict[str, Any], where: str) -> None:
    kind = reason.get("kind")
    if not isinstance(kind, str) or kind not in REASON_KINDS:
        _fail(f"{where}.kind", f"is {kind!r}, not a reason kind")
    _str(reason.get("text"), f"{where}.text")
    _str(reason.get("entry"), f"{where}.entry", optional=True)
    _str(reason.get("source"), f"{where}.source", optional=True)
    _int(reason.get("dim"), f"{where}.dim", 0, _MAX_DIM - 1, optional=True)
    _str(reason.get("value_type"), f"{where}.value_type", optional=True)
    for key in ("expected", "actual", "value"):
        _scalar(reason.get(key), f"{where}.{key}")
    if reason.get("first_use") is not None:
        _location(reason["first_use"], f"{where}.first_use")
    # The typed fields are what the text says (when this version reads the text the same way).
    if kind in ("size_mismatch", "stride_mismatch", "size_specialization", "scalar_value") and reason["text"]:
        parsed = [r for r in parse_reasons(reason["text"]) if r.kind == kind]
        if parsed and not any(
            (r.source, r.dim, r.expected, r.actual)
            == (reason.get("source"), reason.get("dim"), reason.get("expected"), reason.get("actual"))
            for r in parsed
        ):
            _fail(where, f"says {_typed(reason)}, but its text says {_typed(vars(parsed[0]))}")


def _typed(reason: dict[str, Any]) -> str:
    return ", ".join(f"{k}={reason.get(k)!r}" for k in ("source", "dim", "expected", "actual"))


def _check_agreement(compiles: list[dict[str, Any]], ids: dict[str, dict[str, Any]], where: str) -> None:
    """A size guard's dimension lies within the recorded rank, and its sizes are the recorded ones."""
    ranks: dict[str, int] = {}
    for compile_ in compiles:
        for name, entry in compile_.get("inputs", {}).items():
            if entry.get("type") == "Tensor" and "shape" in entry:
                ranks[name] = max(ranks.get(name, 0), len(entry["shape"]))
    for i, compile_ in enumerate(compiles):
        for j, reason in enumerate(compile_.get("reasons", [])):
            source, dim = reason.get("source"), reason.get("dim")
            here = f"{where}.compiles[{i}].reasons[{j}]"
            if reason.get("kind") == "scalar_value" and "value" in reason:
                entry = (ids.get(reason.get("entry")) or {}).get("inputs", {}).get(source) or {}
                if "value" in entry and not _same_value(entry["value"], reason["value"]):
                    _fail(here, f"says `{source}` was {reason['value']!r}; its compile recorded {entry['value']!r}")
            if dim is None or source not in ranks or reason.get("kind") not in ("size_mismatch", "stride_mismatch"):
                continue
            if dim >= ranks[source]:
                _fail(here, f"names dimension {dim} of `{source}`, recorded with {ranks[source]} dimensions")
            if reason["kind"] != "size_mismatch":
                continue
            for size, holder in (
                (reason.get("actual"), compile_),
                (reason.get("expected"), ids.get(reason.get("entry"))),
            ):
                shape = ((holder or {}).get("inputs", {}).get(source) or {}).get("shape")
                if _is_int(size) and isinstance(shape, list) and dim < len(shape) and shape[dim] != size:
                    _fail(here, f"says `{source}` had size {size} in dimension {dim}; the compile recorded {shape}")


def _same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
