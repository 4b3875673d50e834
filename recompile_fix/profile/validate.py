"""What a Profile says must agree with itself and with the files it profiled; checked before a
rule reads it (``apply`` and everything that fixes through the pipeline, ``report``, the language
server). A damaged or hand-edited Profile is one line and exit code 2, never edits other than the
run it records would give. (Its JSON shape is checked on load: ``schema``.)

* Inner agreement: what torch recorded twice agrees. A typed guard failure (kind, source,
  dimension, expected and actual size, value) is what its own text says; a dimension lies within
  the rank recorded for its tensor; the sizes and values a guard names are the ones recorded at
  the two compiles it compares.
* The project: a relative path stays inside it; a span recorded in a file whose bytes are the
  ones profiled is the span of an expression or statement there (CPython records node spans); a
  frame names a ``def`` at its first line.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from collections.abc import Callable
from typing import Any

from recompile_fix.errors import UserError
from recompile_fix.profile.model import Compile, Location, Profile, Reason, is_library_path, same_as_profiled
from recompile_fix.profile.reasons import parse_reasons
from recompile_fix.profile.resume import is_resume

__all__ = ["check_against_sources", "check_agreement"]


def _damaged(what: str) -> UserError:
    return UserError(f"damaged Profile: {what}; profile the program again")


def check_against_sources(
    profile: Profile,
    read: Callable[[str], bytes | None],
    root: str | os.PathLike[str] | None = None,
    *,
    agreement: bool = True,
) -> None:
    """Raise UserError when the Profile does not fit the files whose bytes are the ones it
    profiled (``read``: Profile path -> the file's bytes, None when unreadable): a relative path
    leaves the project, a path names a file of the project (``root``) absolutely (the recorder
    spells those relative: every stage takes an absolute path for code it never edits), a
    compiled frame names no ``def`` there, a recorded span is not the span of an expression or
    statement of the file (CPython records node spans), or a line without a span lies past the
    end. ``agreement=False``: the Profile's inner agreement was checked as it was read, and this
    is a copy mapped onto files edited since (analysis.relocate), whose lines no longer match the
    guard texts torch wrote at the lines profiled."""
    if agreement:
        check_agreement(profile)
    project = os.path.realpath(root) if root is not None else None

    def check_path(path: str) -> None:
        _check_inside(path)
        if _is_system(os.path.normpath(path)):
            raise _damaged(f"the path {path!r} names a system file, not a source file")
        if project is not None and not os.path.isabs(path):
            where = os.path.realpath(os.path.join(project, path))
            if _is_system(where):
                raise _damaged(f"the path {path!r} is a link to {where!r}, a system file, not a source file")
            # Never read (profile/files.py), so the rules would plan without the file: another
            # call site, other edits (the fuzz round's link_out). One line, whatever the link.
            if not (where == project or where.startswith(project.rstrip(os.sep) + os.sep)):
                raise _damaged(f"the path {path!r} is a link to {where!r}, out of the project")
            try:
                mode = os.stat(where).st_mode
            except OSError:
                mode = stat.S_IFREG  # missing or unreadable: said where it matters (stale, missing)
            if not stat.S_ISREG(mode):
                raise _damaged(f"the path {path!r} names no regular file (a FIFO, device or directory)")
        if project is not None and os.path.isabs(path) and not is_library_path(path):
            real = os.path.realpath(path)
            if real == project or real.startswith(project.rstrip(os.sep) + os.sep):
                raise _damaged(f"the path {path!r} names a file of the project by its absolute path")

    files: dict[str, _File | None] = {}

    def file_of(path: str) -> _File | None:
        if path not in files:
            files[path] = None
            # Files outside the project (torch's own, by absolute path) are context: not read.
            data = None if os.path.isabs(path) else read(path)
            if data is not None and same_as_profiled(data, profile.sources.get(path)):
                files[path] = _File.parse(data)
        return files[path]

    def check(location: Location, what: str) -> None:
        file = file_of(location.file)
        if file is None:
            return
        if location.line > max(len(file.lines), 1):
            raise _damaged(f"{what} names line {location.line} of {location.file}, which has {len(file.lines)} lines")
        span = (location.line, location.col, location.end_line, location.end_col)
        if file.spans is not None and None not in span and span not in file.spans:
            raise _damaged(f"{what} names {location.file}:{location.line}:{location.col}, no expression there")

    for path in list(profile.sources) + list(profile.applied):
        check_path(path)
    for frame in profile.frames:
        check_path(frame.file)
        file = file_of(frame.file)
        if file is not None and file.defs is not None and frame.name.isidentifier() and not is_resume(frame.name):
            if (frame.first_line, frame.name) not in file.defs:
                raise _damaged(f"frame `{frame.name}` names line {frame.first_line} of {frame.file}: no such def there")
        for compile_ in frame.compiles:
            for location in compile_.stack:
                check_path(location.file)
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


_SYSTEM_TREES = ("/proc", "/sys", "/dev")


def _is_system(path: str) -> bool:
    return any(path == tree or path.startswith(tree + "/") for tree in _SYSTEM_TREES)


def _check_inside(path: str) -> None:
    if not os.path.isabs(path) and os.path.normpath(path).split(os.sep)[0] == "..":
        raise UserError(f"damaged Profile: the path {path!r} leaves the project; profile the program again")


# -- shape ------------------------------------------------------------------------------------------
def check_agreement(profile: Profile) -> None:
    """Raise UserError where the Profile disagrees with itself."""
    for path in profile.applied:
        # `apply` records the hash of what it wrote; `fix` the hash its last run profiled, the
        # fixed text, so that what did not verify is not offered again: either names a profiled file.
        if path not in profile.sources:
            raise _damaged(f"applied names {path!r}, a file it records no profiled hash of")
    seen: dict[tuple[str, int, str], int] = {}
    for f, frame in enumerate(profile.frames):
        # The recorder keeps one frame per code object (merge.py): a second is a damaged (or
        # padded: 15,000 frames ran for 900 s) Profile.
        if frame.key in seen:
            raise _damaged(
                f"frames[{f}] and frames[{seen[frame.key]}] are the same code (`{frame.name}` at "
                f"{frame.file}:{frame.first_line}); the recorder keeps one frame per code object"
            )
        seen[frame.key] = f
    for f, frame in enumerate(profile.frames):
        ranks: dict[str, int] = {}
        _check_signature(frame.signature, f"frames[{f}].signature")
        # A graph-break resume function's code takes other arguments than the locals recorded
        # for it (`__nested_frame_values`, ...): its inputs are not checked against it.
        parameters = None if frame.name.startswith("torch_dynamo_resume_in_") else _parameters(frame.signature)
        for i, compile_ in enumerate(frame.compiles):
            for name, dims in (compile_.dims or {}).items():
                # A size traced on a tensor the recorder did not record (a view's `._base`) has
                # no shape to hold it against; one recorded with a shape must have that dim.
                shape = (compile_.inputs.get(name) or {}).get("shape")
                for entry in dims:
                    if not isinstance(entry.get("dim"), int) or (
                        isinstance(shape, list) and entry["dim"] >= len(shape)
                    ):
                        raise _damaged(
                            f"frames[{f}].compiles[{i}].dims[{name!r}] names dimension {entry.get('dim')!r} of a tensor "
                            f"recorded with {'no shape' if not isinstance(shape, list) else f'{len(shape)} dimensions'}"
                        )
            for name, entry in compile_.inputs.items():
                root = _ROOT_NAME.match(name)
                if parameters is not None and (root is None or root.group() not in parameters):
                    raise _damaged(
                        f"frames[{f}].compiles[{i}].inputs[{name!r}] is none of `{frame.name}`'s parameters "
                        f"({', '.join(sorted(parameters)) or 'none'})"
                    )
                # The recorder writes a shape for a tensor only: another type with one is a
                # damaged record, whose shape the rules would drop (and mark other dimensions).
                # Likewise a module's class: only a module's record has one (RF010 reads it).
                if "class" in entry and entry.get("type") != "Module":
                    raise _damaged(
                        f"frames[{f}].compiles[{i}].inputs[{name!r}] names a module class but type {entry.get('type')!r}"
                    )
                if "shape" in entry and entry.get("type") != "Tensor":
                    raise _damaged(
                        f"frames[{f}].compiles[{i}].inputs[{name!r}] has a shape but type {entry.get('type')!r}"
                    )
                if entry.get("type") == "Tensor" and "shape" in entry:
                    ranks[name] = max(ranks.get(name, 0), len(entry["shape"]))
        by_id = {c.id: c for c in reversed(frame.compiles)}
        for i, compile_ in enumerate(frame.compiles):
            for j, reason in enumerate(compile_.reasons):
                where = f"frames[{f}].compiles[{i}].reasons[{j}]"
                _check_text(reason, where)
                _check_sizes(reason, compile_, by_id.get(reason.entry or ""), ranks, where)


_ROOT_NAME = re.compile(r"[^\W\d]\w*")


def _check_signature(signature: Any, where: str) -> None:
    """A recorded signature is lists of names and optional names (the rules iterate them)."""
    if signature is None:
        return
    if not isinstance(signature, dict):
        raise _damaged(f"{where} is not an object")
    for key in ("positional", "keyword_only", "free"):
        names = signature.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _damaged(f"{where}.{key} is not a list of names")
    for key in ("varargs", "varkw"):
        if not isinstance(signature.get(key), (str, type(None))):
            raise _damaged(f"{where}.{key} is not a name")


def _parameters(signature: dict[str, Any] | None) -> set[str] | None:
    """The names a compiled frame's arguments are recorded under (None: no signature recorded)."""
    if not isinstance(signature, dict):
        return None
    names: set[str] = set()
    for key in ("positional", "keyword_only", "free"):
        if isinstance(signature.get(key), list):
            names.update(n for n in signature[key] if isinstance(n, str))
    for key in ("varargs", "varkw"):
        if isinstance(signature.get(key), str):
            names.add(signature[key])
    return names


_TYPED_FROM_TEXT = ("size_mismatch", "stride_mismatch", "size_specialization", "scalar_value")


def _check_text(reason: Reason, where: str) -> None:
    """The typed fields, and the line that first used the guarded value, are what the text
    says (when this version reads the text the same way)."""
    if not reason.text:
        return
    parsed = parse_reasons(reason.text)
    text_use = next((r.first_use for r in parsed if r.first_use is not None), None)
    use = reason.first_use
    if use is not None and text_use is not None and (use.line, use.function) != (text_use.line, text_use.function):
        raise _damaged(
            f"{where} says `{reason.source}` was first used at line {use.line} in `{use.function}`; "
            f"its text says line {text_use.line} in `{text_use.function}`"
        )
    parsed = [r for r in parsed if r.kind == reason.kind]
    if reason.kind not in _TYPED_FROM_TEXT:
        # Of any other kind, the guarded value is the one its text names (a rule reads it).
        if parsed and reason.source is not None and not any(r.source == reason.source for r in parsed):
            raise _damaged(f"{where} says `{reason.source}`, but its text says `{parsed[0].source}`")
        if parsed and reason.source is None and any(r.source is not None for r in parsed):
            raise _damaged(f"{where} names no value, but its text says `{parsed[0].source}`")
        return
    if parsed and not any(_typed(r) == _typed(reason) for r in parsed):
        shown = ", ".join(f"{k}={v!r}" for k, v in zip(("source", "dim", "expected", "actual"), _typed(reason)))
        said = ", ".join(f"{k}={v!r}" for k, v in zip(("source", "dim", "expected", "actual"), _typed(parsed[0])))
        raise _damaged(f"{where} says {shown}, but its text says {said}")


def _typed(reason: Reason) -> tuple[Any, ...]:
    return (reason.source, reason.dim, reason.expected, reason.actual)


def _check_sizes(reason: Reason, compile_: Compile, entry: Compile | None, ranks: dict[str, int], where: str) -> None:
    """A guard's dimension lies within the recorded rank; its sizes and values are the ones
    recorded at this compile (actual) and at the cache entry's (expected)."""
    source, dim = reason.source, reason.dim
    # A guard on arithmetic of the value (`(1.0 + clip_range) == 1.15`) keeps no value of it.
    if reason.kind == "scalar_value" and source is not None and entry is not None and reason.expression is None:
        recorded = entry.inputs.get(source) or {}
        if "value" in recorded and not _same_value(recorded["value"], reason.value):
            raise _damaged(f"{where} says `{source}` was {reason.value!r}; its compile recorded {recorded['value']!r}")
    if dim is None or source not in ranks or reason.kind not in ("size_mismatch", "stride_mismatch"):
        return
    if dim >= ranks[source]:
        raise _damaged(f"{where} names dimension {dim} of `{source}`, recorded with {ranks[source]} dimensions")
    if reason.kind != "size_mismatch":
        return
    for size, holder in ((reason.actual, compile_), (reason.expected, entry)):
        shape = ((holder.inputs if holder else {}).get(source) or {}).get("shape")
        if _is_int(size) and isinstance(shape, list) and dim < len(shape) and shape[dim] != size:
            raise _damaged(f"{where} says `{source}` had size {size} in dimension {dim}; the compile recorded {shape}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same_value(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
