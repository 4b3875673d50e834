"""The in-process recorder: runs inside the user's Python process and writes one raw record file.

It is loaded by ``_bootstrap/sitecustomize.py`` and waits until the program imports torch; a
program that never imports torch pays nothing. Everything it reads is torch's own bookkeeping:

* every compile's ``CompilationMetrics`` record, from two sources that are deduplicated: the
  exit of torch's ``MetricsContext`` (its ``record_compilation_metrics`` callback, which no
  program replaces) and the metrics deque (hooked on append). A program may swap, cap or clear
  the deque (``set_compilation_metrics_limit``, another tool's subclass): the first source still
  sees every compile, and at exit the deque left in place is scanned for anything unseen;
* ``torch._dynamo.utils.guard_failures``: every cache entry's failure text for each recompile
  (the metrics keep only the first);
* the Python stack when the compile starts (the metrics' own stack drops the caller), with the
  column span of the calling expression so the rewrite can find the exact call;
* the ``graph_breaks`` artifact log, which names the user file:line of each break;
* whether the program ran a backward pass (``torch.autograd.backward``/``grad``, which
  ``Tensor.backward`` calls): a fact about the program that later edits do not change;
* the wall time of each call of a ``torch.compile(module)`` wrapper during which nothing
  compiled (its steady state): what a compile-time fix that adds eager work per block would
  cost the program (RF004 / RF007's choice).

Programs rearrange that bookkeeping: ``torch._dynamo.reset()`` restarts compile ids and clears
the callbacks and ``guard_failures``, ``logging.config`` disables loggers, other tools clear the
compile callbacks. Every hook is put back on each compile; compile ids are numbered by
*generation* (one per reset); at exit the compiles recorded are checked against the compile ids
torch handed out (``convert_frame.FRAME_COMPILE_COUNTER``) and a shortfall is reported, never
hidden. Each compile is also appended to ``part-<pid>.jsonl`` as it is recorded, so a process
that ends without ``atexit`` (``os._exit``, a kill) still leaves what it compiled.

Every torch internal is looked up with ``getattr`` (releases 2.6 to 2.15 differ): what is missing
is recorded in ``features`` and degrades the record, never the user's program. Standard library
and torch only; JSON out (never pickles); torch is asked to write no files. The raw records are
typed and merged into a Profile by ``recompile_fix.profile.merge``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import logging
import os
import sys
import time
import types

from recompile_fix.profile.graph_breaks import parse_graph_break  # standard library only, as all of this file
from recompile_fix.profile.graph_facts import compiled_graph_dims, spellable_module_path
from recompile_fix.profile.libraries import interpreter_record  # standard library only
from recompile_fix.profile.module_tensors import held_tensors  # standard library only
from recompile_fix.profile.run_seed import note_untouched_generators, seed_generators  # standard library only

__all__ = ["BACKEND_ENV", "MAX_STRINGS", "PARTS_DIR_ENV", "install", "install_when_torch_imported", "user_stack"]

PARTS_DIR_ENV = "RECOMPILE_FIX_PARTS_DIR"
BACKEND_ENV = "RECOMPILE_FIX_BACKEND"

# Frames from these trees are torch's (or ours), never the user's call site.
_TORCH_DIR = None
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the recompile_fix package
# The standard library's wrappers (contextlib, functools, runpy) are never the user's call site.
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_MAX_STACK = 12
_MAX_STEADY_SAMPLES = 200  # call times kept per compiled module (the median of these is written)
_GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"


def _is_internal(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    if "site-packages" not in path and path.startswith(_STDLIB_DIR + os.sep):
        return True
    return (_TORCH_DIR is not None and path.startswith(_TORCH_DIR)) or path.startswith(_OWN_DIR)


def _frame_location(frame) -> dict:
    code = frame.f_code
    line = frame.f_lineno
    end_line = col = end_col = None
    try:
        # 3.11+: the span of the instruction being run, i.e. the whole call expression.
        positions = list(code.co_positions())[frame.f_lasti // 2]
        if positions[0] is not None:
            line, end_line, col, end_col = positions
    except (AttributeError, IndexError):
        pass
    return {
        "file": os.path.abspath(code.co_filename),
        "line": line,
        "end_line": end_line,
        "col": col,
        "end_col": end_col,
        "function": code.co_name,
    }


def user_stack(skip_frames: int = 1) -> list[dict]:
    """The user's frames on the current stack, outermost first (torch and runpy frames dropped)."""
    frames = []
    frame = sys._getframe(skip_frames)
    while frame is not None and len(frames) < _MAX_STACK:
        if not _is_internal(frame.f_code.co_filename):
            frames.append(_frame_location(frame))
        frame = frame.f_back
    frames.reverse()
    return frames


def _describe_value(value) -> dict | None:
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
        marked = getattr(value, "_dynamo_dynamic_indices", None)
        if marked and len(marked) <= value.dim():
            entry["marked"] = sorted(int(d) for d in marked if isinstance(d, int) and 0 <= d < value.dim())
        return entry
    if isinstance(value, (bool, int, float)) and not isinstance(value, type):
        return {"type": type(value).__name__, "value": value}
    return None


# What one compile's argument walk may record and visit: a transformers cache is
# ``kwargs['past_key_values'].layers[0].keys``, four steps from the frame's locals.
_MAX_DEPTH = 4
_MAX_ENTRIES = 256  # tensors (and top-level scalars) recorded
_MAX_ITEMS = 64  # items of one list, tuple or dict looked into
_MAX_VISITS = 1024  # objects looked at
_MAX_STR = 120  # characters of a string attribute recorded
MAX_STRINGS = 32  # string attributes recorded per compile
_SIGNATURE = "__signature__"  # inputs[_SIGNATURE]: how the compiled code takes its arguments
_MODULE_INTERNALS: frozenset[str] | None = None  # nn.Module's own __dict__ keys (_parameters, ...)
_LIBRARY_PARTS = ("site-packages", "dist-packages")


def _is_library(filename: str) -> bool:
    parts = os.path.abspath(filename).split(os.sep)
    return any(part in _LIBRARY_PARTS for part in parts)


class _InputWalk:
    """The tensors reachable from a compiled frame's arguments, keyed as torch spells a guard's
    source: ``x``, ``args[1]``, ``kwargs['input_ids']``, ``kwargs['past_key_values'].layers[0].keys``,
    ``self.cache.layers[0].keys``. Torch names only the first failing guard of a recompile; these
    shapes show every tensor that changed with it (the mask beside the ids, a cache's layers).
    Bounded in depth, items, entries and visits; scalars are kept at the top level only."""

    def __init__(self, torch) -> None:
        global _MODULE_INTERNALS
        self.torch = torch
        self.entries: dict[str, dict] = {}
        self.visits = 0
        self.strings = 0
        self.roots: dict[str, object] = {}  # top-level expression -> object (for held_by)
        if _MODULE_INTERNALS is None:
            _MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))

    def visit(self, source: str, value, depth: int) -> None:
        if len(self.entries) >= _MAX_ENTRIES or self.visits >= _MAX_VISITS:
            return
        try:
            self._visit(source, value, depth)
        except Exception:  # a property that raises, a dict that changes size: skip that object
            pass

    def _visit(self, source: str, value, depth: int) -> None:
        self.visits += 1
        torch = self.torch
        if depth <= 1:
            self.roots[source] = value
        described = _describe_value(value)
        if described is not None:
            if described["type"] == "Tensor" or depth <= 1:
                self.entries[source] = described
            return
        if isinstance(value, str):
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
        elif isinstance(value, torch.nn.Module):
            if depth <= 1:
                # The class by identity (its qualified name and, below, its file): two files'
                # `class Net` are two classes, and RF006 must edit the one that ran.
                entry = {"type": "Module", "class": type(value).__name__, "qualname": type(value).__qualname__}
                # The file defining its class: where RF010 reads a library's lazy defaults that
                # another guard hid (torch names only the first guard that fails).
                defined_in = getattr(sys.modules.get(type(value).__module__), "__file__", None)
                if isinstance(defined_in, str):
                    entry["file"] = defined_in
                self.entries[source] = entry
            # Its own buffers and parameters (dtype, rank, device: what a rule's tensor meets),
            # then plain attributes only (a cache held as self.cache): submodules' parameters
            # and buffers keep their shapes, and a model has thousands.
            if depth <= 1:
                for key, entry in held_tensors(value, source, _describe_value).items():
                    if len(self.entries) < _MAX_ENTRIES:
                        self.entries.setdefault(key, entry)
            for name, item in list(vars(value).items())[:_MAX_ITEMS]:
                if name not in _MODULE_INTERNALS and not name.startswith("__") and not callable(item):
                    self.visit(f"{source}.{name}", item, depth + 1)
        elif _walkable(value):
            for name, item in list(vars(value).items())[:_MAX_ITEMS]:
                if not name.startswith("__") and not callable(item):
                    self.visit(f"{source}.{name}", item, depth + 1)


def _is_setting(value: str) -> bool:
    """A short word-like string (``single_label_classification``, ``gelu``), not a path or text."""
    return 0 < len(value) <= _MAX_STR and not any(c in value for c in "/\\\n\r")


def _walkable(value) -> bool:
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


def _signature(code) -> dict:
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
    return {"positional": positional, "keyword_only": keyword_only, "varargs": varargs, "varkw": varkw}


def _holders(frame) -> dict[int, str]:
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
        elif _walkable(value):
            for attr, item in list(vars(value).items())[:_MAX_ITEMS]:
                if not attr.startswith("_"):
                    held.setdefault(id(item), f"{name}.{attr}")
    for name, value in list(frame.f_globals.items())[:_MAX_VISITS]:
        if not name.startswith("__"):
            held.setdefault(id(value), name)
    return held


def _user_frame_past_library(frame):
    """The user's frame that called library code which called the compiled code (a
    ``model.generate()``, a Trainer), or None when the user's code made the call itself."""
    through_library = False
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal(filename):
            if not _is_library(filename):
                return frame if through_library else None
            through_library = True
        frame = frame.f_back
    return None


def _compiled_frame_inputs() -> dict:
    """Shapes and scalar values of the arguments of the frame being compiled, and of the tensors
    reachable from them (see ``_InputWalk``), plus the code's signature under ``__signature__``.
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

    frame = sys._getframe(3)
    while frame is not None:
        if frame.f_code.co_name == "_compile" and "code" in frame.f_locals and "locals" in frame.f_locals:
            code, values = frame.f_locals["code"], frame.f_locals["locals"]
            if not isinstance(values, dict):
                return {}
            signature = _signature(code)
            walk = _InputWalk(torch)
            for name in signature["positional"] + signature["keyword_only"]:
                walk.visit(name, values.get(name), 0)
            if signature["varargs"]:
                for i, item in enumerate(tuple(values.get(signature["varargs"]) or ())[:_MAX_ITEMS]):
                    walk.visit(f"{signature['varargs']}[{i}]", item, 1)
            if signature["varkw"]:
                for key, item in list(dict(values.get(signature["varkw"]) or {}).items())[:_MAX_ITEMS]:
                    walk.visit(f"{signature['varkw']}[{key!r}]", item, 1)
            try:
                user = _user_frame_past_library(frame)
                held = _holders(user) if user is not None else {}
            except Exception:  # the user's frame could not be read: no held_by, the shapes stay
                held = {}
            for source, value in walk.roots.items():
                if id(value) in held and value is not None and not isinstance(value, (bool, int, float)):
                    walk.entries.setdefault(source, {"type": type(value).__name__})["held_by"] = held[id(value)]
            inputs = walk.entries
            inputs[_SIGNATURE] = signature
            return inputs
        frame = frame.f_back
    return {}


_MAX_STACKS = 16


def _forward_arguments(kind: type) -> int:
    """The arguments of a block class's ``forward`` past ``self`` (``*args`` / ``**kwargs`` one
    each), through decorators that keep ``__wrapped__`` (transformers' ``deprecate_kwarg``)."""
    import inspect

    try:
        forward = inspect.unwrap(kind.forward)
    except (AttributeError, ValueError):  # no forward, or a cycle of __wrapped__
        return 1
    code = getattr(forward, "__code__", None)
    if code is None:
        return 1
    varargs = bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return max(code.co_argcount + code.co_kwonlyargcount - 1, 0) + varargs


def _compiled_frame_blocks() -> list[dict]:
    """Stacks of identical blocks in the module whose code is being compiled: the frame's first
    argument (``self`` of a forward) when it is an ``nn.Module``. Every ModuleList / Sequential in
    it of at least two children of one class that is not torch's own, by attribute path. RF004 and
    RF007 read them: they find blocks wherever the model keeps them (a ModuleDict, a parent
    class's ``__init__`` in another file, a pip package's model) without reading its source."""
    frame = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_name == "_compile" and "locals" in frame.f_locals):
        frame = frame.f_back
    if frame is None or "code" not in frame.f_locals:
        return []
    code, values = frame.f_locals["code"], frame.f_locals["locals"]
    if not isinstance(values, dict):
        return []
    import inspect

    import torch

    if code.co_argcount:
        argument = code.co_varnames[0]
        root = values.get(argument)
    elif code.co_flags & 0x04:  # (*args, **kwargs): a decorator's wrapper around a forward
        argument = code.co_varnames[code.co_kwonlyargcount]
        given = values.get(argument)
        root = given[0] if isinstance(given, tuple) and given else None
        argument = "self" if root is not None and getattr(root, "forward", None) is not None else argument
    else:
        return []
    if not isinstance(root, torch.nn.Module):
        return []
    stacks = []
    for path, module in root.named_modules():
        if not path or not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        if not spellable_module_path(root, path, torch):
            continue  # under a ModuleDict's key no rule could write (``"layer-1"``, ``"0"``)
        children = list(module.children())
        kinds = {type(child) for child in children}
        if len(children) < 2 or len(kinds) != 1:
            continue
        (kind,) = kinds
        if kind.__module__.split(".")[0] == "torch":
            continue  # torch's own layers: not a block anyone would decorate or compile alone
        try:
            file = os.path.abspath(inspect.getsourcefile(kind) or "")
            line = inspect.getsourcelines(kind)[1]
        except (OSError, TypeError):
            continue
        stacks.append(
            {
                "path": path,
                "count": len(children),
                "block": kind.__qualname__,
                "file": file,
                "line": line,
                "container": "Sequential" if isinstance(module, torch.nn.Sequential) else "ModuleList",
                "argument": argument,
                "owner": type(root).__qualname__,
                # What one block compiled on its own takes and checks at every call (RF004 /
                # RF007's choice weighs it): its parameters and buffers, and its forward's arguments.
                "graph_inputs": sum(1 for _ in children[0].parameters())
                + sum(1 for _ in children[0].buffers())
                + _forward_arguments(kind),
            }
        )
        if len(stacks) >= _MAX_STACKS:
            break
    return stacks


def _compiled_frame_backend() -> str | None:
    """The backend torch compiles the frame with, from the ``compiler_fn`` of torch's ``_compile``
    (convert_frame.py) unwrapped to the innermost backend (``_torchdynamo_orig_backend``): the one
    actually used, however the program chose it (``backend=args.backend``, a variable, a config).
    Its ``compiler_name`` (``"eager"``, ``"inductor"``, a callable's ``__name__``), else the
    callable's own name. None where torch's frame does not hold it."""
    frame = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_name == "_compile" and "compiler_fn" in frame.f_locals):
        frame = frame.f_back
    if frame is None:
        return None
    backend = frame.f_locals["compiler_fn"]
    for _ in range(16):  # the wrapper chain torch's innermost_backend() walks, bounded
        inner = getattr(backend, "_torchdynamo_orig_backend", None)
        if inner is None or not callable(inner):
            break
        backend = inner
    for name in (getattr(backend, "compiler_name", None), getattr(backend, "__name__", None)):
        if isinstance(name, str) and name:
            return name[:200]
    func = getattr(backend, "func", None)  # a functools.partial around a backend
    name = getattr(func, "__name__", None)
    return name[:200] if isinstance(name, str) and name else type(backend).__name__[:200]


class _Recorder:
    def __init__(self) -> None:
        self.compiles: list[dict] = []
        self.graph_breaks: list[dict] = []
        # Keyed by (generation, compile id): what the compile-start callback saw.
        self.start_stacks: dict[tuple, list[dict]] = {}
        self.start_inputs: dict[tuple, dict] = {}
        self.start_blocks: dict[tuple, list[dict]] = {}
        self.start_backends: dict[tuple, str | None] = {}
        self.seen_failures: dict[object, int] = {}
        self.started = time.time()
        self.torch_version = None
        self.backward_ran = False
        # Each metrics record is keyed (compile id, start time, forward?), so that the two
        # sources and the exit scan never count one compile twice.
        self.seen: set[tuple] = set()
        self.recorded_ids: set[tuple] = set()  # (generation, compile id) of forward records
        # torch._dynamo.reset() restarts compile ids at 0/0: each reset starts a generation.
        self.generation = 0
        self.assigned_before = 0  # compile ids torch handed out in earlier generations
        self.last_assigned = 0  # the last count of this generation's compile ids we saw
        self.sources: collections.Counter = collections.Counter()
        self.events: list[str] = []
        self.features: dict[str, bool] = {}
        self.part = _PartFile(self)
        self._in_ensure = False
        self.expect_cleared_callbacks = False
        self.compile_starts = 0  # a call during which this moved compiled something: not steady
        # (file, first line, name) of a compiled module's forward -> [calls, first call times]
        self.steady: dict[tuple[str, int, str], list] = {}

    # -- torch hooks -------------------------------------------------------------------
    def on_compile_start(self, *args) -> None:
        self.compile_starts += 1
        self.ensure_hooks()
        self._check_generation()
        # torch >= 2.8 passes CallbackArgs(callback_trigger, compile_id); 2.6 passes nothing,
        # and runs the callback inside the compile's CompileContext.
        compile_id = getattr(args[0], "compile_id", None) if args else _current_compile_id()
        key = (self.generation, str(compile_id))
        self.start_stacks[key] = user_stack(2)
        self.start_inputs[key] = _compiled_frame_inputs()
        try:
            self.start_blocks[key] = _compiled_frame_blocks()
        except Exception:  # never break the user's program over bookkeeping
            self.start_blocks[key] = []
        try:
            self.start_backends[key] = _compiled_frame_backend()
        except Exception:  # never break the user's program over bookkeeping
            self.start_backends[key] = None

    def on_context_exit(self, start_time_ns, metrics, exc_type, exc_value) -> None:
        """The record torch builds (``CompilationMetrics.create``), from the arguments torch's
        ``MetricsContext`` passes its exit callback: it reaches us whatever deque (or none) the
        program left in place."""
        import types

        compile_id = metrics.get("compile_id") or _current_compile_id()
        record = types.SimpleNamespace(
            **{
                **metrics,
                "compile_id": compile_id,
                "start_time_us": start_time_ns // 1000 if isinstance(start_time_ns, int) else None,
                "fail_type": exc_type.__qualname__ if exc_type else None,
                "fail_reason": str(exc_value) if exc_value else None,
            }
        )
        self.on_metrics(record, source="metrics_context")

    def on_metrics(self, metrics, source: str = "deque") -> None:
        if getattr(metrics, "is_runtime", False):
            return  # a runtime record (autotuning at run time): no compile
        compile_id = str(getattr(metrics, "compile_id", None))
        forward = getattr(metrics, "is_forward", True) is not False
        key = (compile_id, getattr(metrics, "start_time_us", None), forward)
        if key in self.seen:
            return
        self.seen.add(key)
        # Records from the two hooks arrive while torch is inside that compile: its stack, its
        # arguments and guard_failures are current. Records found by a scan are not.
        live = source in ("deque", "metrics_context")
        if live:
            self._check_generation()
            if forward and (self.generation, compile_id) in self.recorded_ids:
                # A compile id torch gave out before, with another start time: its counters
                # were reset by a path our reset() wrapper did not see.
                self._new_generation(f"compile id {compile_id} given out again: torch's compile ids restarted")
        self.sources[source] += 1
        if forward:
            self.recorded_ids.add((self.generation, compile_id))
        # Reasons appended since the last record belong to this compile (torch computes them
        # just before it compiles, or before it gives up at the recompile limit).
        new_reasons: list[str] = []
        frame = None
        guard_failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
        if live and isinstance(guard_failures, dict):
            for code, failures in list(guard_failures.items()):
                before = self.seen_failures.get(code, 0)
                if len(failures) < before:  # the list was cleared (torch._dynamo.reset())
                    before = 0
                if len(failures) > before:
                    new_reasons.extend(failures[before:])
                    frame = {
                        "file": os.path.abspath(code.co_filename),
                        "line": code.co_firstlineno,
                        "name": code.co_name,
                    }
                self.seen_failures[code] = len(failures)
        if getattr(metrics, "co_name", None):
            frame = {
                "file": os.path.abspath(metrics.co_filename),
                "line": metrics.co_firstlineno,
                "name": metrics.co_name,
            }
        start_key = (self.generation, compile_id)
        stack = self.start_stacks.pop(start_key, None) or (user_stack(3) if live else [])
        # The start callback can be missing (cleared by the program or by reset()): torch's
        # _compile frame is still on the stack here and holds the arguments.
        inputs = self.start_inputs.pop(start_key, None) or (_compiled_frame_inputs() if live else {})
        blocks = self.start_blocks.pop(start_key, None) or []
        backend = self.start_backends.pop(start_key, None)
        # The graph's own word on the sizes it took (dynamic, or specialised and why).
        dims = compiled_graph_dims() if live and forward else None
        if backend is None and live:
            try:
                backend = _compiled_frame_backend()
            except Exception:  # never break the user's program over bookkeeping
                backend = None

        def seconds(us_field: str, s_field: str):
            us = getattr(metrics, us_field, None)
            if us is not None:
                return us / 1e6
            return getattr(metrics, s_field, None)

        compile_ = {
            "compile_id": compile_id,
            "generation": self.generation,
            "source": source,
            "frame": frame,
            "is_forward": forward,
            "recompile_reason": getattr(metrics, "recompile_reason", None),
            "guard_failures": new_reasons,
            "fail_type": getattr(metrics, "fail_type", None),
            "fail_reason": getattr(metrics, "fail_reason", None),
            "restart_reasons": sorted(getattr(metrics, "restart_reasons", None) or []),
            "stack": stack,
            "inputs": inputs,
            "blocks": blocks,
            "backend": backend,
            "dims": dims,
            "seconds": {
                "dynamo": seconds("dynamo_cumulative_compile_time_us", "entire_frame_compile_time_s"),
                "backend": seconds("aot_autograd_cumulative_compile_time_us", "backend_compile_time_s"),
                "inductor": seconds("inductor_cumulative_compile_time_us", "inductor_compile_time_s"),
            },
        }
        self.compiles.append(compile_)
        self.part.append("compile", compile_)
        if live:
            self.ensure_hooks()

    def on_graph_break_log(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a log record we cannot format is not worth failing the run
            return
        graph_break = parse_graph_break(text)
        if graph_break is None:
            return
        file, line, reason = graph_break
        compile_id = _current_compile_id()
        graph_break_ = {
            "compile_id": None if compile_id is None else str(compile_id),
            "generation": self.generation,
            "file": os.path.abspath(file),
            "line": line,
            "reason": reason,
        }
        self.graph_breaks.append(graph_break_)
        self.part.append("graph_break", graph_break_)

    # -- generations (torch._dynamo.reset()) ------------------------------------------------
    def _check_generation(self) -> None:
        """A drop in the compile ids torch has handed out means they were reset."""
        assigned = _assigned_compile_ids()
        if assigned is None:
            return
        if assigned < self.last_assigned:
            self._new_generation(f"torch's compile ids restarted ({self.last_assigned} handed out, now {assigned})")
        self.last_assigned = assigned

    def before_reset(self) -> None:
        assigned = _assigned_compile_ids()
        if assigned is not None:
            self.last_assigned = max(self.last_assigned, assigned)

    def _new_generation(self, why: str) -> None:
        self.assigned_before += self.last_assigned
        self.last_assigned = 0
        self.generation += 1
        self.seen_failures.clear()  # reset() clears guard_failures
        self.events.append(f"{why}: compile ids numbered again from 0/0 (generation {self.generation})")

    # -- keeping our hooks in place ---------------------------------------------------------
    def ensure_hooks(self) -> None:
        """Put back every hook the program (or torch) took away. Runs on each compile."""
        if self._in_ensure:
            return
        self._in_ensure = True
        try:
            self._ensure_hooks()
        except Exception as exc:  # never break the user's program over bookkeeping
            print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)
        finally:
            self._in_ensure = False

    def _ensure_hooks(self) -> None:
        dynamo_utils = sys.modules.get("torch._dynamo.utils")
        if dynamo_utils is None:
            return
        # MetricsContext's exit callback: module-global contexts (2.6-2.10) are patched in place;
        # the module's record_compilation_metrics is what per-thread contexts (2.13+) get.
        for context in _metrics_contexts(dynamo_utils):
            on_exit = getattr(context, "_on_exit", None)
            if callable(on_exit) and not getattr(on_exit, "_recompile_fix", False):
                context._on_exit = _wrap_on_exit(on_exit, self)
        original = getattr(dynamo_utils, "record_compilation_metrics", None)
        if callable(original) and not getattr(original, "_recompile_fix", False):
            dynamo_utils.record_compilation_metrics = _wrap_on_exit(original, self)
        current = getattr(dynamo_utils, "_compilation_metrics", None)
        if isinstance(current, collections.deque) and not isinstance(current, _RecordingDeque):
            self.scan(current, "deque-scan")
            if type(current) is collections.deque:
                # set_compilation_metrics_limit() made a new plain one: hook it, keeping its cap.
                hooked = _RecordingDeque(current, maxlen=current.maxlen)
                hooked.recorder = self
                dynamo_utils._compilation_metrics = hooked
                self._event(
                    f"torch's metrics deque was replaced by the program (maxlen {current.maxlen}): hooked again"
                )
            else:
                self._event(
                    f"another tool's {type(current).__name__} holds torch's metrics: read at each compile, not replaced"
                )
        callback_module = sys.modules.get("torch._dynamo.callback")
        handler = getattr(callback_module, "callback_handler", None)
        starts = getattr(handler, "start_callbacks", None)
        if isinstance(starts, list) and self.on_compile_start not in starts:
            register = getattr(handler, "register_start_callback", None)
            if callable(register):
                register(self.on_compile_start)
                if self.features.get("compile_start_callback_registered") and not self.expect_cleared_callbacks:
                    self._event("the compile-start callbacks were cleared: ours registered again")
                self.features["compile_start_callback_registered"] = True
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        if not any(isinstance(h, _GraphBreakHandler) and h.recorder is self for h in logger.handlers):
            logger.addHandler(_GraphBreakHandler(self))
            if self.features.get("graph_break_handler_added"):
                self._event("our graph-break log handler was removed: added again")
            self.features["graph_break_handler_added"] = True
        if logger.disabled and not logger.propagate:
            # logging.config disabled it; with propagation off only our handler hears it.
            logger.disabled = False
            self._event("the graph-break logger was disabled (logging.config): enabled again for our handler")
        self._keep_graph_break_log_enabled()

    def _event(self, text: str) -> None:
        if text not in self.events:
            self.events.append(text)

    def scan(self, records, source: str) -> None:
        for metrics in list(records):
            try:
                self.on_metrics(metrics, source=source)
            except Exception as exc:
                print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)

    def _keep_graph_break_log_enabled(self) -> None:
        # torch._logging.set_logs() (called by user code) resets artifact levels; re-assert ours.
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        if logger.level > logging.DEBUG or logger.level == logging.NOTSET:
            # Off (the user did not ask for TORCH_LOGS=graph_breaks): turn it on for our handler
            # only, so the program's stderr stays as it would be without us.
            logger.setLevel(logging.DEBUG)
            logger.propagate = False

    # -- the cross-check ----------------------------------------------------------------------
    def reconcile(self) -> dict:
        """At exit: the compiles recorded against the compile ids torch handed out (every
        compile attempt gets one, a failed one at the recompile limit too)."""
        dynamo_utils = sys.modules.get("torch._dynamo.utils")
        current = getattr(dynamo_utils, "_compilation_metrics", None)
        if isinstance(current, collections.deque):
            self.scan(current, "exit-scan")  # the last fallback: whatever the deque still holds
        assigned = _assigned_compile_ids()
        if assigned is None:
            torch_ids = None
        elif assigned < self.last_assigned:  # a reset after the last compile
            torch_ids = self.assigned_before + self.last_assigned + assigned
        else:
            torch_ids = self.assigned_before + assigned
        recorded = len(self.recorded_ids)
        return {
            "torch_version": self.torch_version,
            "path": "in-process",
            "sources": dict(self.sources),
            "events": list(self.events),
            "generations": self.generation + 1,
            "torch_compile_ids": torch_ids,
            "recorded_compile_ids": recorded,
            "complete": None if torch_ids is None else recorded >= torch_ids,
            "features": dict(self.features),
        }

    # -- output -------------------------------------------------------------------------
    def header(self) -> dict:
        return {
            "pid": os.getpid(),
            "rank": _int_env("RANK"),
            "local_rank": _int_env("LOCAL_RANK"),
            "argv": list(sys.argv),
            "torch_version": self.torch_version,
            "python_version": sys.version.split()[0],
            # Where this interpreter keeps its libraries: their files are spelled by import path.
            "interpreter": interpreter_record(),
        }

    def write(self, exit_info: dict) -> None:
        parts_dir = os.environ.get(PARTS_DIR_ENV)
        if not parts_dir:
            return
        record = {
            **self.header(),
            "compiles": self.compiles,
            "graph_breaks": self.graph_breaks,
            "backward_ran": self.backward_ran,
            "import_paths": _program_import_paths(),
            "recorder": self.reconcile(),
            "exit": exit_info,
            "wall_seconds": time.time() - self.started,
            "steady": self.steady_calls(),
        }
        os.makedirs(parts_dir, exist_ok=True)
        path = os.path.join(parts_dir, f"part-{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh)
        os.replace(tmp, path)
        self.part.remove()  # the complete record replaces what was written as we went

    def note_steady_call(self, key: tuple[str, int, str], seconds: float, cpu_seconds: float) -> None:
        entry = self.steady.setdefault(key, [0, [], []])
        entry[0] += 1
        if len(entry[1]) < _MAX_STEADY_SAMPLES:
            entry[1].append(seconds)
            entry[2].append(cpu_seconds)

    def steady_calls(self) -> list[dict]:
        """Per compiled module's forward: calls that compiled nothing, the median wall seconds of
        one, and the calling thread's CPU seconds of the fastest (load only ever adds to it)."""
        out = []
        for (file, line, name), (calls, walls, cpus) in self.steady.items():
            out.append(
                {
                    "file": file,
                    "line": line,
                    "name": name,
                    "calls": calls,
                    "seconds": _median(walls),
                    "cpu_seconds": min(cpus) if cpus else None,
                }
            )
        return out

    def after_fork_in_child(self) -> None:
        """A forked child records its own compiles only (the parent's are in the parent's file)."""
        self.compiles, self.graph_breaks = [], []
        self.steady = {}
        self.start_stacks, self.start_inputs = {}, {}
        self.start_backends = {}
        self.seen_failures, self.seen, self.recorded_ids = {}, set(), set()
        self.sources = collections.Counter()
        self.part = _PartFile(self)


class _PartFile:
    """``part-<pid>.jsonl``: the process header, then each compile and graph break as recorded,
    one JSON object a line, flushed. ``run._read_parts`` reads it when the process left no
    ``part-<pid>.json`` (it ended without atexit: ``os._exit``, a signal, the OOM killer)."""

    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder
        self.handle = None
        self.path: str | None = None
        self.failed = False

    def append(self, kind: str, item: dict) -> None:
        parts_dir = os.environ.get(PARTS_DIR_ENV)
        if not parts_dir or self.failed:
            return
        try:
            if self.handle is None:
                os.makedirs(parts_dir, exist_ok=True)
                self.path = os.path.join(parts_dir, f"part-{os.getpid()}.jsonl")
                self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open, flushed per line)
                self.handle.write(json.dumps({"process": self.recorder.header()}) + "\n")
            self.handle.write(json.dumps({kind: item}) + "\n")
            self.handle.flush()
        except (OSError, TypeError, ValueError) as exc:
            self.failed = True
            print(f"recompile-fix: recorder cannot write {self.path}: {exc!r}", file=sys.stderr)

    def remove(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.remove(self.path)
        self.handle, self.path = None, None


def _program_import_paths() -> list[str]:
    """The program's own import paths (``sys.path`` as it ended, with what the program or
    PYTHONPATH added), installed code and our bootstrap left out: `verify` and `fix` run the
    program in a copy that must hold them."""
    installed = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = []
    for entry in sys.path:
        path = os.path.abspath(entry or os.curdir)
        parts = path.split(os.sep)
        if (
            not os.path.isdir(path)
            or "site-packages" in parts
            or "dist-packages" in parts
            or any(path == d or path.startswith(d + os.sep) for d in installed)
            or os.path.exists(os.path.join(path, "sitecustomize.py"))  # ours (or a system one)
            or path in found
        ):
            continue
        found.append(path)
    return found


def _int_env(name: str):
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def _current_compile_id():
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except Exception:  # no such API in this torch, or no compile under way
        return None
    return None if compile_id is None else str(compile_id)


def _assigned_compile_ids() -> int | None:
    """How many compile ids torch has handed out since the last reset (one per compile
    attempt, failed ones too): ``convert_frame.FRAME_COMPILE_COUNTER`` (frame id -> count)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    counter = getattr(convert_frame, "FRAME_COMPILE_COUNTER", None)
    if not isinstance(counter, dict):
        return None
    return sum(v for v in counter.values() if isinstance(v, int))


def _metrics_contexts(dynamo_utils) -> list:
    """torch's MetricsContext objects that exist now: module globals (2.6-2.10) and this
    thread's (2.13+ makes one per thread, on first use)."""
    found = [getattr(dynamo_utils, n, None) for n in ("_METRICS_CONTEXT", "_RUNTIME_METRICS_CONTEXT")]
    local = getattr(dynamo_utils, "_metrics_context_tls", None)
    found += [getattr(local, n, None) for n in ("metrics_context", "runtime_metrics_context")]
    return [c for c in found if c is not None and hasattr(c, "_on_exit")]


def _wrap_on_exit(original, recorder: _Recorder):
    """torch's exit callback ``(start_ns, end_ns, metrics, exc_type, exc_value)`` (2.6-2.15), then ours."""

    def on_exit(start_time_ns, end_time_ns, metrics, exc_type, exc_value):
        try:
            original(start_time_ns, end_time_ns, metrics, exc_type, exc_value)
        finally:
            try:
                recorder.on_context_exit(start_time_ns, dict(metrics), exc_type, exc_value)
            except Exception as exc:  # never break the user's program over bookkeeping
                print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)

    on_exit._recompile_fix = True  # type: ignore[attr-defined]
    on_exit.__wrapped__ = original  # type: ignore[attr-defined]
    return on_exit


def _wrap_reset(original, recorder: _Recorder):
    """``torch._dynamo.reset()``: compile ids restart, so a new generation starts; the callbacks
    it clears are registered again at once."""

    def reset(*args, **kwargs):
        recorder.before_reset()
        try:
            return original(*args, **kwargs)
        finally:
            recorder._new_generation("torch._dynamo.reset()")
            recorder.expect_cleared_callbacks = True  # reset() clears them: no news
            recorder.ensure_hooks()
            recorder.expect_cleared_callbacks = False

    reset._recompile_fix = True  # type: ignore[attr-defined]
    reset.__wrapped__ = original  # type: ignore[attr-defined]
    reset.__doc__ = getattr(original, "__doc__", None)
    return reset


class _GraphBreakHandler(logging.Handler):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__(logging.DEBUG)
        self.recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        self.recorder.on_graph_break_log(record)


class _RecordingDeque(collections.deque):
    """torch's metrics deque with a hook on append; it keeps the cap the program set."""

    recorder: _Recorder | None = None

    def append(self, item) -> None:  # noqa: D401
        super().append(item)
        if self.recorder is not None:
            try:
                self.recorder.on_metrics(item, source="deque")
            except Exception as exc:  # never break the user's program over bookkeeping
                print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)


_RECORDER: _Recorder | None = None


def install(numpy_before_torch: bool = False) -> _Recorder:
    """Start recording in this process. Idempotent. ``numpy_before_torch``: the program imported
    numpy before torch (it may have seeded it: left alone)."""
    global _RECORDER, _TORCH_DIR
    if _RECORDER is not None:
        return _RECORDER
    import torch
    import torch._dynamo

    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
    try:
        seed_generators(torch, numpy_before_torch)
    except Exception as exc:  # never break the user's program over it
        print(f"recompile-fix: random generators not seeded: {exc!r}", file=sys.stderr)
    recorder = _Recorder()
    recorder.torch_version = getattr(torch, "__version__", None)
    _RECORDER = recorder
    dynamo_utils = _import("torch._dynamo.utils")
    _import("torch._dynamo.convert_frame")  # FRAME_COMPILE_COUNTER: the exit cross-check
    callback_module = _import("torch._dynamo.callback")

    existing = getattr(dynamo_utils, "_compilation_metrics", None)
    if isinstance(existing, collections.deque) and type(existing) is collections.deque:
        deque = _RecordingDeque(existing, maxlen=existing.maxlen)
        deque.recorder = recorder
        dynamo_utils._compilation_metrics = deque
    recorder.features.update(
        {
            "metrics_context": bool(_metrics_contexts(dynamo_utils))
            or callable(getattr(dynamo_utils, "record_compilation_metrics", None)),
            "metrics_deque": isinstance(existing, collections.deque),
            "compile_start_callback": callable(getattr(callback_module, "on_compile_start", None)),
            "guard_failures": isinstance(getattr(dynamo_utils, "guard_failures", None), dict),
            "frame_compile_counter": _assigned_compile_ids() is not None,
            "compile_context": _has_compile_context(),
        }
    )
    if not (recorder.features["metrics_context"] or recorder.features["metrics_deque"]):
        print(
            f"recompile-fix: torch {recorder.torch_version} has neither MetricsContext nor a metrics deque: "
            "its compiles cannot be recorded in-process; run the program with TORCH_TRACE=DIR and use "
            "`recompile-fix profile --from-trace DIR`",
            file=sys.stderr,
        )
    reset = getattr(torch._dynamo, "reset", None)
    if callable(reset) and not getattr(reset, "_recompile_fix", False):
        torch._dynamo.reset = _wrap_reset(reset, recorder)
    recorder.ensure_hooks()

    backend = os.environ.get(BACKEND_ENV)
    if backend:
        _force_backend(torch, backend)
    _note_backward(torch, recorder)
    _time_compiled_modules(recorder)

    # `recompile-fix verify` also wants what each compiled callable returned.
    from recompile_fix.profile.compiled_outputs import install_from_env

    install_from_env(torch)

    atexit.register(_write_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=recorder.after_fork_in_child)
    _write_on_sigterm()
    return recorder


def _write_on_sigterm() -> None:
    """SIGTERM ends a Python process without its atexit handlers: write the record first, then
    die of the signal as the program would have. A program with its own SIGTERM handler keeps it
    (set before torch is imported: left alone; set after: it replaces this one)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum, _frame):
        _EXIT_INFO.update({"status": "terminated", "signal": signum})
        try:
            _write_at_exit()
        finally:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def _import(name: str):
    try:
        return importlib.import_module(name)
    except Exception:  # a torch without this module: the features say what is missing
        return None


def _has_compile_context() -> bool:
    try:
        from torch._guards import CompileContext
    except Exception:
        return False
    return callable(getattr(CompileContext, "current_compile_id", None))


def _force_backend(torch, backend: str) -> None:
    original = torch.compile

    def compile_with_backend(*args, **kwargs):
        kwargs["backend"] = backend
        return original(*args, **kwargs)

    compile_with_backend.__wrapped__ = original
    torch.compile = compile_with_backend


def _note_backward(torch, recorder: _Recorder) -> None:
    """Note the first backward pass. The wrappers' frames are skipped by dynamo (it would compile
    them as frames of their own when eager code runs them under a compiled caller), and inside a
    compiled region `Tensor.backward()` breaks the graph before reaching them, as it did before."""
    try:
        from torch._dynamo.eval_frame import skip_code
    except ImportError:  # an older torch: no way to keep dynamo out of the wrappers; not noted
        return
    autograd = torch.autograd
    try:
        from torch._guards import TracingContext
    except ImportError:
        return

    def wrap(original):
        def noted(*args, **kwargs):
            # A backend compiling a graph (AOT autograd tracing the joint graph) calls grad too.
            if not recorder.backward_ran and TracingContext.try_get() is None:
                recorder.backward_ran = True
            return original(*args, **kwargs)

        skip_code(noted.__code__)
        noted.__wrapped__ = original
        noted.__name__, noted.__qualname__, noted.__doc__ = original.__name__, original.__qualname__, original.__doc__
        return noted

    autograd.backward = wrap(autograd.backward)
    autograd.grad = wrap(autograd.grad)


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def _time_compiled_modules(recorder: _Recorder) -> None:
    """Time each call of a ``torch.compile(module)`` wrapper (``OptimizedModule.__call__``) and keep
    those during which nothing compiled: the program's steady-state step through that module, in
    wall seconds and in the calling thread's CPU seconds (which a busy machine inflates far less:
    3.0 -> 4.0 ms where the wall time went to 8.0, two other processes on two cores).
    Dynamo never runs this wrapper itself (tracing a caller, it unwraps ``_orig_mod``), so a
    compiled caller sees the module as before; the cost is two clock reads a call."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    module_class = getattr(eval_frame, "OptimizedModule", None)
    if module_class is None or getattr(module_class.__call__, "_recompile_fix", False):
        return
    original = module_class.__call__

    def timed_call(self, *args, **kwargs):
        # Either moves when something compiles (the start callback can be cleared by the program).
        starts = (recorder.compile_starts, len(recorder.compiles))
        began, began_cpu = time.perf_counter(), time.thread_time()
        result = original(self, *args, **kwargs)
        if (recorder.compile_starts, len(recorder.compiles)) == starts:
            try:
                code = self._orig_mod.forward.__code__
                key = (os.path.abspath(code.co_filename), code.co_firstlineno, code.co_name)
            except AttributeError:  # a wrapped forward without its code: not timed
                return result
            recorder.note_steady_call(key, time.perf_counter() - began, time.thread_time() - began_cpu)
        return result

    timed_call._recompile_fix = True  # type: ignore[attr-defined]
    timed_call.__wrapped__ = original  # type: ignore[attr-defined]
    module_class.__call__ = timed_call


_EXIT_INFO: dict = {"status": "exited"}


def _write_at_exit() -> None:
    if _RECORDER is not None:
        _RECORDER.write(_EXIT_INFO)


def _note_uncaught(exc_type, exc, tb) -> None:
    _EXIT_INFO.update({"status": "raised", "exception": f"{exc_type.__name__}: {exc}"[:500]})
    _previous_excepthook(exc_type, exc, tb)


_previous_excepthook = sys.excepthook


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Installs the recorder right after the program's own ``import torch`` finishes."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module
        numpy_before_torch = "numpy" in sys.modules

        def exec_module(module):
            original_exec(module)
            install(numpy_before_torch)

        loader.exec_module = exec_module
        return spec


def install_when_torch_imported() -> None:
    global _previous_excepthook
    _previous_excepthook = sys.excepthook
    sys.excepthook = _note_uncaught
    if "torch" in sys.modules:  # before the program's first line (a warm runner's child)
        install()
    else:
        note_untouched_generators()
        sys.meta_path.insert(0, _TorchImportWatcher())
