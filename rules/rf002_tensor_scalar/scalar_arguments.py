"""The Python numbers a compiled frame was specialised on, from the run: every scalar argument
that changed between two compiles of the frame, not only the one a guard names, and where each
one is a parameter of the user's code.

Torch names only the first failing guard of each cache entry: when two annealed scalars change
together (a temperature and a KL weight), the Profile's reasons name one, and the other's values
are in the recorded inputs only. And a guard's source is spelled as the compiled frame holds the
value: a plain name (``c``) for a compiled function, ``kwargs['num_items_in_batch']`` or
``args[2]`` where the compiled frame is a decorator's ``wrapper(*args, **kwargs)`` (a
transformers forward behind ``functools.wraps``). There the parameter is the wrapped function's;
the guard's first use (the user line torch names) is inside it, and the user's call passes it by
keyword (or by position past the module, for ``args[i]``).

For RF002, which wraps such numbers in 0-d tensors at the call."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import Compile, Frame, Location

__all__ = ["ScalarArgument", "Wrapped", "changed_scalars", "forwards", "parameter_function", "parameter_inputs"]

_ITEM = re.compile(r"^(?P<holder>[A-Za-z_]\w*)\[(?P<key>'[A-Za-z_]\w*'|\"[A-Za-z_]\w*\"|\d+)\]$")
_NUMBERS = ("float", "int")


@dataclass
class ScalarArgument:
    """One Python number argument of a compiled frame whose value changed between compiles."""

    source: str  # as the Profile spells it: ``c``, ``kwargs['num_items_in_batch']``, ``args[2]``
    name: str | None  # the parameter it binds in the user's function (None: not known yet)
    keyword: bool = False  # reached the frame through ``**kwargs``: the call passes it by keyword
    index: int | None = None  # reached it through ``*args``: its position there (self included)
    offset: int = 0  # positional arguments the wrapper passes before ``*args`` (its own ``self``)
    named: bool = True  # a guard named it (False: it changed with a guard that named another)
    values: list = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)  # float / int

    @property
    def kind(self) -> str:
        return "float" if "float" in self.kinds or any(isinstance(v, float) for v in self.values) else "int"


def changed_scalars(frame: Frame) -> list[ScalarArgument]:
    """Every int or float argument of ``frame`` a guard named (torch, or the recorder's evaluation of
    the cached graphs' value guards), then every one whose recorded value
    differs between a recompile and the cache entry its guard failed on (or the compile before
    it), in the order first seen. Attribute chains (``self.n``, ``G['m'].n``) are module state
    (RF006), not arguments."""
    found: dict[str, ScalarArgument] = {}
    # The recorder's failing value guards too (``Compile.also_failed``): a number that changed
    # with a tensor's size, behind the size guard torch named, is guarded all the same.
    for reason in frame.value_reasons():
        if reason.kind == "scalar_value" and reason.source and reason.value_type in _NUMBERS:
            recorded = {(c.inputs.get(reason.source) or {}).get("type") for c in frame.compiles}
            if recorded - {None, "None", *_NUMBERS}:
                continue  # the run recorded no number there (a tensor): a guard that does not fit it
            argument = _argument(frame, reason.source, named=True)
            if argument is not None:
                found.setdefault(reason.source, argument).kinds.add(reason.value_type)
    named_other = {r.source for r in frame.reasons() if r.source and r.kind != "scalar_value"}
    by_id = {c.id: c for c in frame.compiles}
    for position, compile_ in enumerate(frame.compiles):
        if not compile_.is_recompile or compile_.limit_hit or not compile_.reasons:
            continue
        if not any(r.kind == "scalar_value" for r in compile_.reasons):
            continue  # a shape or type change: whether a number is also guarded is not shown
        entries = [by_id[r.entry] for r in compile_.reasons if r.entry in by_id]
        before = entries or ([frame.compiles[position - 1]] if position else [])
        for source, entry in compile_.inputs.items():
            if source in found or source in named_other or entry.get("type") not in _NUMBERS:
                continue
            if any(_differs(entry, other.inputs.get(source)) for other in before):
                argument = _argument(frame, source, named=False)
                if argument is not None:
                    found[source] = argument
                    argument.kinds.add(entry["type"])
    for argument in found.values():
        argument.values = _values(frame, argument.source)
    return list(found.values())


def _differs(entry: dict, other: dict | None) -> bool:
    return (
        isinstance(other, dict)
        and other.get("type") in _NUMBERS
        and entry.get("value") is not None
        and other.get("value") is not None
        and entry["value"] != other["value"]
    )


def _argument(frame: Frame, source: str, named: bool) -> ScalarArgument | None:
    if source.isidentifier():
        return ScalarArgument(source=source, name=source, named=named)
    match = _ITEM.match(source)
    if match is None:
        return None
    signature = frame.signature or {}
    holder, key = match.group("holder"), match.group("key")
    if key[0] in "'\"" and holder == signature.get("varkw", "kwargs"):
        return ScalarArgument(source=source, name=key[1:-1], keyword=True, named=named)
    if key.isdigit() and holder == signature.get("varargs", "args"):
        return ScalarArgument(source=source, name=None, index=int(key), named=named)
    return None


def _values(frame: Frame, source: str) -> list:
    values: list = []
    for compile_ in frame.compiles:
        entry = compile_.inputs.get(source, {})
        if entry.get("type") in _NUMBERS and entry.get("value") not in values:
            values.append(entry["value"])
    for reason in frame.reasons():
        if reason.source == source and reason.value is not None and reason.value not in values:
            values.append(reason.value)
    return values


@dataclass(frozen=True)
class Wrapped:
    """The function whose parameter a compiled frame's argument is, and the file it is in."""

    source: SourceFile
    file: str
    func: cst.FunctionDef


def parameter_function(
    source: SourceFile,
    frame: Frame,
    compiled: cst.FunctionDef | None,
    argument: ScalarArgument,
    read: Callable[[str], SourceFile | None] | None = None,
) -> Wrapped | None:
    """The function whose parameter ``argument`` is: the compiled function itself for a plain
    name; for a ``*args``/``**kwargs`` item, the function the wrapper passes them to: the one the
    run recorded it closes over and calls with them (``forward_fn(self, *args, **kwargs)``, in
    any file ``read`` can read), else the one where a guard of the frame was first used in the
    wrapper's file (torch names that user line: it is inside the wrapped function). Sets
    ``argument.name`` (and ``argument.offset``) for an ``args[i]`` item. None when not found."""
    if not argument.keyword and argument.index is None:
        return Wrapped(source, frame.file, compiled) if compiled is not None else None
    holder = argument.source.split("[", 1)[0]
    forwarding = _forwarding_call(compiled, holder) if compiled is not None else None
    if compiled is None or forwarding is None:
        return None  # the wrapper does not pass them on as it got them: which parameter is unknown
    # Positional arguments the wrapper passes before `*args` (`self`): `args[i]` binds the
    # wrapped function's parameter `i` places after them.
    offset = 0
    for arg in forwarding.args:
        if arg.star:
            break
        if arg.keyword is None:
            offset += 1
    for wrapped in _closed_over(frame, forwarding, read) + _at_first_uses(source, frame, compiled, argument):
        if _binds(wrapped.func, argument, offset):
            return wrapped
    return None


def _closed_over(frame: Frame, forwarding: cst.Call, read: Callable[[str], SourceFile | None] | None) -> list[Wrapped]:
    """The function the run recorded the wrapper closes over under the name it calls, then the one
    that function's ``functools.wraps`` chain of ``*args, **kwargs`` wrappers ends in (a compiled
    `@torch.no_grad()` function: torch's ``decorate_context`` passes its arguments on to it)."""
    closes_over = (frame.signature or {}).get("closes_over") or {}
    where = closes_over.get(forwarding.func.value) if isinstance(forwarding.func, cst.Name) else None
    if read is None or not isinstance(where, dict):
        return []
    found = []
    for place in (where, where.get("wraps")):
        if not isinstance(place, dict) or not isinstance(place.get("file"), str):
            continue
        line, name = place.get("line"), place.get("name")
        if not isinstance(line, int) or not isinstance(name, str):
            continue
        source = read(place["file"])
        func = source.function_def(line, name.rsplit(".", 1)[-1]) if source else None
        if source is not None and func is not None:
            found.append(Wrapped(source, place["file"], func))
    return found


def _at_first_uses(
    source: SourceFile, frame: Frame, compiled: cst.FunctionDef, argument: ScalarArgument
) -> list[Wrapped]:
    found = []
    for location in _first_uses(frame, argument.source):
        if location.file != frame.file:
            continue
        func = _enclosing_function(source, location)
        if func is not None and func is not compiled:
            found.append(Wrapped(source, frame.file, func))
    return found


def _binds(func: cst.FunctionDef, argument: ScalarArgument, offset: int) -> bool:
    positional, keyword_only = _parameters(func)
    if argument.keyword:
        return argument.name in positional + keyword_only
    assert argument.index is not None
    if offset + argument.index < len(positional):
        argument.name = positional[offset + argument.index]
        argument.offset = offset
        return True
    return False


def parameter_inputs(
    frame: Frame, func: cst.FunctionDef, argument: ScalarArgument, compile_: Compile, forwards_args: bool = True
) -> dict:
    """``compile_``'s recorded inputs under the names of ``func``'s parameters: the inputs
    themselves for a plain argument; ``kwargs['k']`` (and ``args[i]``, where the wrapper passes
    ``*args`` on as it got them: ``forwards_args``) mapped to the parameters the wrapped function
    binds them to."""
    if not argument.keyword and argument.index is None:
        return compile_.inputs
    signature = frame.signature or {}
    varargs, varkw = signature.get("varargs") or "args", signature.get("varkw") or "kwargs"
    positional, keyword_only = _parameters(func)
    mapped: dict = {}
    for index, name in enumerate(positional[argument.offset :] if forwards_args else ()):
        if f"{varargs}[{index}]" in compile_.inputs:
            mapped[name] = compile_.inputs[f"{varargs}[{index}]"]
    for name in positional + keyword_only:
        if f"{varkw}[{name!r}]" in compile_.inputs:
            mapped[name] = compile_.inputs[f"{varkw}[{name!r}]"]
    return mapped


def forwards(compiled: cst.FunctionDef, holder: str) -> bool:
    """Does ``compiled`` pass its ``*holder`` / ``**holder`` on unchanged (``fn(*args, **kwargs)``)?"""
    return _forwarding_call(compiled, holder) is not None


def _forwarding_call(compiled: cst.FunctionDef, holder: str) -> cst.Call | None:
    """The first call in ``compiled`` that passes ``*holder`` / ``**holder`` on as it got them."""
    found: list[cst.Call] = []

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if not found and any(
                a.star in ("*", "**") and isinstance(a.value, cst.Name) and a.value.value == holder for a in node.args
            ):
                found.append(node)

    compiled.visit(Find())
    return found[0] if found else None


def _first_uses(frame: Frame, source: str) -> list[Location]:
    """Where the frame's guards were first used: this source's first, then any other's (a hidden
    scalar has no guard of its own; the wrapped function is the same)."""
    own = [r.first_use for r in frame.reasons() if r.source == source and r.first_use is not None]
    others = [r.first_use for r in frame.reasons() if r.source != source and r.first_use is not None]
    return own + others


def _enclosing_function(source: SourceFile, location: Location) -> cst.FunctionDef | None:
    best = None
    for node in source.nodes(cst.FunctionDef):
        pos = source.positions[node]
        if pos.start.line <= location.line <= pos.end.line and (
            location.function is None or node.name.value == location.function
        ):
            if best is None or source.positions[best].start.line < pos.start.line:
                best = node
    return best


def _parameters(func: cst.FunctionDef) -> tuple[list[str], list[str]]:
    params = func.params
    return (
        [p.name.value for p in (*params.posonly_params, *params.params)],
        [p.name.value for p in params.kwonly_params],
    )


def seen_as_none(frame: Frame, param: str) -> bool:
    """Did the run pass None for ``param`` at a compile, or a guard on it fail because it was (or
    was not) None?"""
    if any(c.inputs.get(param, {}).get("type") == "None" for c in frame.compiles):
        return True
    return any(
        r.source == param and ("None" in r.text.split("\n", 1)[0]) and r.kind in ("id_mismatch", "type_mismatch")
        for r in frame.reasons()
    )
