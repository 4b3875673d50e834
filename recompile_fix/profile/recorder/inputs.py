"""The arguments of the frame being compiled: the shapes, dtypes and devices of the tensors
reachable from them (keyed as torch spells a guard's source), top-level scalar values, short
setting strings on attribute chains, a module argument's class by identity, how the code takes
its arguments, and how the user's frame names an argument that library code passed through.
Read from the locals of torch's ``_compile`` (convert_frame.py); bounded, and never raises."""

from __future__ import annotations

import math
import os
import sys
import types
from typing import Any

from recompile_fix.profile.module_tensors import held_tensors  # standard library only
from recompile_fix.profile.recorder.stack import user_frame_past_library
from recompile_fix.profile.recorder.value_guards import FAILED_VALUES, failed_value_guards, guarded_holders

__all__ = ["MAX_STRINGS", "InputWalk", "compiled_frame_inputs", "describe_value", "signature", "walkable"]

# What one compile's argument walk may record and visit: a transformers cache is
# ``kwargs['past_key_values'].layers[0].keys``, four steps from the frame's locals.
_MAX_DEPTH = 4
_MAX_ENTRIES = 256  # tensors (and top-level scalars) recorded
_MAX_ITEMS = 64  # items of one list, tuple or dict looked into
_MAX_VISITS = 1024  # objects looked at
_MAX_STR = 120  # characters of a string attribute recorded
MAX_STRINGS = 32  # string attributes recorded per compile
_SIGNATURE = "__signature__"  # inputs[_SIGNATURE]: how the compiled code takes its arguments
_MODULE_INTERNALS: frozenset[str] = frozenset()  # nn.Module's own __dict__ keys (_parameters, ...)


def describe_value(value: object) -> dict | None:
    import torch

    if isinstance(value, torch.Tensor):
        entry = {
            "type": "Tensor",
            "shape": list(value.shape),
            "stride": list(value.stride()),
            "dtype": str(value.dtype).replace("torch.", ""),
            "device": str(value.device),
        }
        # The dims the program marked with `mark_dynamic` (a hard mark): another call of the same
        # frame must mark them so too, or the graphs do not match (`_dynamo_dynamic_indices`).
        # `maybe_marked`: with `maybe_mark_dynamic` (a weak mark). Torch guards either kind's
        # presence (`_has_dynamo_dim_marking`): a call that passes the tensor unmarked first
        # compiles again at the marked call (RC024).
        for key, attribute in (("marked", "_dynamo_dynamic_indices"), ("maybe_marked", "_dynamo_weak_dynamic_indices")):
            marked = getattr(value, attribute, None)
            if marked and len(marked) <= value.dim():
                entry[key] = sorted(int(d) for d in marked if isinstance(d, int) and 0 <= d < value.dim())
        return entry
    if isinstance(value, float) and not math.isfinite(value):
        # A default like diffusers' `s_tmax=float("inf")`: JSON has no spelling for it, and no
        # rule writes a non-finite number into a program; it is left out, as an unknown type is.
        return None
    if isinstance(value, (bool, int, float)) and not isinstance(value, type):
        return {"type": type(value).__name__, "value": value}
    return None


class InputWalk:
    """The tensors reachable from a compiled frame's arguments, keyed as torch spells a guard's
    source: ``x``, ``args[1]``, ``kwargs['input_ids']``, ``kwargs['past_key_values'].layers[0].keys``,
    ``self.cache.layers[0].keys``. Torch names only the first failing guard of a recompile; these
    shapes show every tensor that changed with it (the mask beside the ids, a cache's layers).
    Bounded in depth, items, entries and visits; scalars are kept at the top level only."""

    def __init__(self, torch: types.ModuleType) -> None:
        global _MODULE_INTERNALS
        self.torch = torch
        self.entries: dict[str, dict] = {}
        self.visits = 0
        self.strings = 0
        self.roots: dict[str, object] = {}  # top-level expression -> object (for held_by)
        if not _MODULE_INTERNALS:
            _MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))

    def visit(self, source: str, value: object, depth: int) -> None:
        if len(self.entries) >= _MAX_ENTRIES or self.visits >= _MAX_VISITS:
            return
        try:
            self._visit(source, value, depth)
        except Exception:  # a property that raises, a dict that changes size: skip that object
            pass

    def _visit(self, source: str, value: object, depth: int) -> None:
        self.visits += 1
        if depth <= 1:
            self.roots[source] = value
        described = describe_value(value)
        if described is not None:
            if described["type"] == "Tensor" or depth <= 1:
                self.entries[source] = described
            return
        if isinstance(value, str):
            self._visit_string(source, value, depth)
            return
        if value is None and depth <= 1:
            self.entries[source] = {"type": "None"}  # an optional argument's None: a type the rules read
        if depth >= _MAX_DEPTH or value is None:
            return
        if isinstance(value, dict):
            for key, item in list(value.items())[:_MAX_ITEMS]:
                if isinstance(key, (str, int)):
                    self.visit(f"{source}[{key!r}]", item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value[:_MAX_ITEMS]):
                self.visit(f"{source}[{index}]", item, depth + 1)
        elif isinstance(value, self.torch.nn.Module):
            self._visit_module(source, value, depth)
        elif walkable(value):
            for name, item in list(vars(value).items())[:_MAX_ITEMS]:
                if not name.startswith("__") and not callable(item):
                    self.visit(f"{source}.{name}", item, depth + 1)

    def _visit_string(self, source: str, value: str, depth: int) -> None:
        # A short string on an object the compiled module holds (``self.config.problem_type``):
        # the value a lazily defaulted attribute was given, which RF010 sets before the first
        # call. Attribute chains only, a few per compile.
        name = source.rsplit(".", 1)[-1]
        if (
            1 <= depth <= 3
            and "[" not in source
            and not name.startswith("_")
            and _is_setting(value)
            and self.strings < MAX_STRINGS
        ):
            self.entries[source] = {"type": "str", "value": value}
            self.strings += 1

    def _visit_module(self, source: str, value: object, depth: int) -> None:
        if depth <= 1:
            # The class by identity (its qualified name and, below, its file): two files'
            # `class Net` are two classes, and RF006 must edit the one that ran.
            entry = {"type": "Module", "class": type(value).__name__, "qualname": type(value).__qualname__}
            # The file defining its class: where RF010 reads a library's lazy defaults that
            # another guard hid (torch names only the first guard that fails).
            defined_in = getattr(sys.modules.get(type(value).__module__), "__file__", None)
            if isinstance(defined_in, str):
                # Absolute as every path the recorder writes: a script run by a launcher
                # (`python -m cProfile train.py`, runpy) has its path as it was typed.
                entry["file"] = os.path.abspath(defined_in)
            self.entries[source] = entry
        # Its own buffers and parameters (dtype, rank, device: what a rule's tensor meets),
        # then plain attributes only (a cache held as self.cache): submodules' parameters
        # and buffers keep their shapes, and a model has thousands.
        if depth <= 1:
            for key, held in held_tensors(value, source, describe_value).items():
                if len(self.entries) < _MAX_ENTRIES:
                    self.entries.setdefault(key, held)
        for name, item in list(vars(value).items())[:_MAX_ITEMS]:
            if name not in _MODULE_INTERNALS and not name.startswith("__") and not callable(item):
                self.visit(f"{source}.{name}", item, depth + 1)


def _is_setting(value: str) -> bool:
    """A short word-like string (``single_label_classification``, ``gelu``), not a path or text."""
    return 0 < len(value) <= _MAX_STR and not any(c in value for c in "/\\\n\r")


def walkable(value: object) -> bool:
    """A plain object whose attributes may hold tensors (a cache, a dataclass, a config), not a
    class, function, module or one of torch's own objects."""
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    if module == "builtins" or module.split(".")[0] in ("torch", "numpy", "typing", "enum"):
        return False
    try:
        vars(value)
    except TypeError:
        return False
    return not isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType))


def signature(code: types.CodeType) -> dict[str, Any]:
    """How the compiled code takes its arguments: which locals are positional parameters, which
    is ``*args`` and which ``**kwargs`` (guards spell their items ``args[1]``, ``kwargs['k']``)."""
    names = code.co_varnames
    positional = list(names[: code.co_argcount])
    keyword_only = list(names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount])
    at = code.co_argcount + code.co_kwonlyargcount
    varargs = varkw = None
    if code.co_flags & 0x04:
        varargs = names[at]
        at += 1
    if code.co_flags & 0x08:
        varkw = names[at]
    taken = {"positional": positional, "keyword_only": keyword_only, "varargs": varargs, "varkw": varkw}
    if code.co_freevars:  # names it closes over (`fn` in torch's `inner` wrapper), recorded as inputs too
        taken["free"] = list(code.co_freevars)
    return taken


def closed_over_functions(code: types.CodeType, values: dict) -> dict[str, dict[str, Any]]:
    """The plain functions the code closes over, by name: where each is defined. A decorator's
    ``wrapper(self, *args, **kwargs)`` calls the function it wraps through a closure
    (``forward_fn``): which one, and so whose parameter ``args[1]`` is, only the run knows."""
    found: dict[str, dict[str, Any]] = {}
    for name in code.co_freevars[:_MAX_ITEMS]:
        value = values.get(name)
        if isinstance(value, types.FunctionType):
            inner = value.__code__
            found[name] = {"file": inner.co_filename, "line": inner.co_firstlineno, "name": value.__qualname__}
            wrapped = _passed_through_to(value)
            if wrapped is not None:
                code_of = wrapped.__code__
                found[name]["wraps"] = {
                    "file": code_of.co_filename,
                    "line": code_of.co_firstlineno,
                    "name": wrapped.__qualname__,
                }
    return found


def _passed_through_to(function: types.FunctionType) -> types.FunctionType | None:
    """The function a chain of ``functools.wraps`` decorators ends in (``@torch.no_grad()`` on a
    compiled function: torch's ``decorate_context`` calls it), where each wrapper on the way
    takes nothing but ``*args, **kwargs`` (so passes them on as it got them, as such decorators
    do); None where there is no such chain."""
    seen = 0
    while seen < 8:
        code = function.__code__
        takes_only_star = code.co_argcount == 0 and code.co_kwonlyargcount == 0 and code.co_flags & 0x0C == 0x0C
        wrapped = getattr(function, "__wrapped__", None)
        if not takes_only_star or not isinstance(wrapped, types.FunctionType):
            return function if seen else None
        function, seen = wrapped, seen + 1
    return None


def _holders(frame: types.FrameType) -> dict[int, str]:
    """id(object) -> how the user's frame names it: a local, a local dict's item, a local's
    attribute, or a global. Only what a mark placed in that frame could reach."""
    held: dict[int, str] = {}
    f_locals = frame.f_locals
    for name, value in list(f_locals.items())[:_MAX_VISITS]:
        held.setdefault(id(value), name)
    for name, value in list(f_locals.items())[:_MAX_ITEMS]:
        if isinstance(value, dict):
            for key, item in list(value.items())[:_MAX_ITEMS]:
                if isinstance(key, str):
                    held.setdefault(id(item), f"{name}[{key!r}]")
        elif walkable(value):
            for attr, item in list(vars(value).items())[:_MAX_ITEMS]:
                if not attr.startswith("_"):
                    held.setdefault(id(item), f"{name}.{attr}")
    for name, value in list(frame.f_globals.items())[:_MAX_VISITS]:
        if not name.startswith("__"):
            held.setdefault(id(value), name)
    return held


def compiled_frame_inputs() -> dict:
    """Shapes and scalar values of the arguments of the frame being compiled, and of the tensors
    reachable from them (see ``InputWalk``), plus the code's signature under ``__signature__`` and
    the value guards a recompile fails under ``__failed_values__`` (``value_guards``).
    Read from the locals of torch's ``_compile`` (convert_frame.py), which holds them. When
    library code made the call, each argument the user's own frame also holds (the same object)
    says how it names it (``held_by``): the library passed it through unchanged. Never raises:
    an object that misbehaves when looked at costs its entry, not the user's compile."""
    try:
        return _read_compiled_frame_inputs()
    except Exception:
        return {}


def _read_compiled_frame_inputs() -> dict:
    import torch

    frame: types.FrameType | None = sys._getframe(3)
    while frame is not None:
        if frame.f_code.co_name == "_compile" and "code" in frame.f_locals and "locals" in frame.f_locals:
            code, values = frame.f_locals["code"], frame.f_locals["locals"]
            if not isinstance(values, dict):
                return {}
            taken = signature(code)
            closed = closed_over_functions(code, values)
            if closed:
                taken["closes_over"] = closed
            walk = InputWalk(torch)
            for name in taken["positional"] + taken["keyword_only"]:
                walk.visit(name, values.get(name), 0)
            if taken["varargs"]:
                for i, item in enumerate(tuple(values.get(taken["varargs"]) or ())[:_MAX_ITEMS]):
                    walk.visit(f"{taken['varargs']}[{i}]", item, 1)
            if taken["varkw"]:
                for key, item in list(dict(values.get(taken["varkw"]) or {}).items())[:_MAX_ITEMS]:
                    walk.visit(f"{taken['varkw']}[{key!r}]", item, 1)
            # A module the code closes over: `torch.compile(module)` compiles torch's `inner`
            # wrapper around it when its forward lives in torch's files (a `@torch.no_grad()`
            # forward, an nn.Sequential), and guards spell it `fn`.
            for name in code.co_freevars[:_MAX_ITEMS]:
                if isinstance(values.get(name), torch.nn.Module):
                    walk.visit(name, values[name], 0)
            _note_holders(walk, frame)
            inputs: dict[str, object] = dict(walk.entries)
            inputs[_SIGNATURE] = taken
            globals_ = frame.f_locals.get("globals")
            scope = globals_ if isinstance(globals_, dict) else {}
            failed = failed_value_guards(code, values, scope)
            if failed is not None:
                inputs[FAILED_VALUES] = failed
                try:
                    for source, holder in guarded_holders(failed, values, scope, torch.nn.Module).items():
                        inputs.setdefault(source, holder)
                except Exception:  # an object that cannot be described: the rules read the source
                    pass
            return inputs
        frame = frame.f_back
    return {}


def _note_holders(walk: InputWalk, compile_frame: types.FrameType) -> None:
    """``held_by`` on each argument the user's frame past library code holds too."""
    try:
        user = user_frame_past_library(compile_frame)
        held = _holders(user) if user is not None else {}
    except Exception:  # the user's frame could not be read: no held_by, the shapes stay
        held = {}
    for source, value in walk.roots.items():
        # Not for numbers and strings: small ones are shared objects (every "" is one), so the
        # same id says nothing of who holds this one (a config's `name_or_path = ""`).
        if id(value) in held and value is not None and not isinstance(value, (bool, int, float, str, bytes)):
            walk.entries.setdefault(source, {"type": type(value).__name__})["held_by"] = held[id(value)]
