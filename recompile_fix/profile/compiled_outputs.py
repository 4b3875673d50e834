"""What each compiled callable returned: recorded in the user's process for `recompile-fix verify`.

The recorder (``recorder/install.py``) installs this when ``RECOMPILE_FIX_RECORD_OUTPUTS=DIR`` is set. It
wraps what ``torch.compile`` returns, outside the compiled region:

* a function (``torch.compile(fn)``, ``@torch.compile``, ``@torch.compile(...)``): a
  ``functools.wraps`` wrapper around the compiled function;
* a module (``torch.compile(module)`` returns an ``OptimizedModule``): ``OptimizedModule.__call__``
  is patched once, and records only for the instances this process compiled;
* ``module.compile()``: torch calls ``torch.compile(self._call_impl)``; the wrapper it gets back
  is stored as ``self._compiled_call_impl``, keyed by the module's class.

It keeps the tensors of the first N calls of each callable (detached copies; Python scalars as
0-d tensors) and writes them at exit with ``torch.save`` as plain lists of tensors and strings,
which ``torch.load(weights_only=True)`` reads back: no pickle of a user object.

With ``RECOMPILE_FIX_FAIL_ON_RECOMPILE=1`` it also asserts that nothing compiles after warm-up:
the first call of each compiled callable is warm-up (it runs under the ``default`` stance, and
may compile what it likes); once the first warm-up call has returned, the stance is
``fail_on_recompile``, so any later compile (a recompile, or a frame first reached after
warm-up) raises in the program. Feature-detected: a torch without ``torch.compiler.set_stance``
prints one line and runs as usual.

Beside each ``.pt`` file it writes the same record without the tensors (``.json``), so that a
recompile-fix installed without torch reads what was called (``load_refs``) and has the
tensors compared by the user's interpreter (``judge_main``, ``compare``).

A run that records outputs also runs with torch's deterministic algorithms (warn only, unless
the program sets the mode itself): inductor's CPU backward accumulates with atomic adds (an
embedding's gradient), so two runs of one unchanged training program differ (1.5e-8 in a
weight, 1.5e-4 after a few AdamW steps), and a fix's rounding, or its bits, could not be told
from the program's own noise. Every run compared (before and after a fix) runs so.

Only the standard library and torch, as in the recorder.
"""

from __future__ import annotations

import atexit
import collections
import functools
import json
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "ALL_NAN",
    "CALLS_ENV",
    "DEFAULT_CALLS",
    "FAIL_ON_RECOMPILE_ENV",
    "FORMAT",
    "MAX_BYTES",
    "OUTPUTS_ENV",
    "TensorRef",
    "compare",
    "install",
    "install_from_env",
    "judge_main",
    "load",
    "load_refs",
    "OutputRecorder",
]

OUTPUTS_ENV = "RECOMPILE_FIX_RECORD_OUTPUTS"  # directory to write outputs-<pid>.pt into
CALLS_ENV = "RECOMPILE_FIX_OUTPUT_CALLS"  # how many first calls of each callable to keep
FAIL_ON_RECOMPILE_ENV = "RECOMPILE_FIX_FAIL_ON_RECOMPILE"
DEFAULT_CALLS = 8
MAX_BYTES = 256 * 1024 * 1024  # per process; past it, later outputs are not kept (and it says so)
FORMAT = "recompile-fix/outputs"
ALL_NAN = "NaN everywhere in both runs"  # what ``compare`` says of an equal pair that proves nothing
_MAX_PARAMETERS = 256  # per call of a callable that returns no tensor
_MAX_OPTIMIZERS = 8  # whose parameters are compared at exit (each held until then: a sweep's first)
_MAX_GLOBALS = 32  # the program's module-level tensors (and lists of them) compared at exit
_MAX_GLOBAL_ITEMS = 1024  # in one list, tuple or dict


class OutputRecorder:
    """The compiled callables of one process and the tensors their first calls returned."""

    def __init__(
        self,
        torch,
        *,
        max_calls: int = DEFAULT_CALLS,
        max_bytes: int = MAX_BYTES,
        fail_on_recompile: bool = False,
        with_file: bool = True,
    ) -> None:
        self.torch = torch
        self.max_calls = max_calls
        self.max_bytes = max_bytes
        self.with_file = with_file
        self.callables: list[dict] = []
        self.outputs: list[list[list]] = []  # per callable, per call: tensors
        self.sources: dict[int, Any] = {}  # callable index -> what was compiled (a function, a bound method)
        self.bytes = 0
        self.truncated = False
        self._seen: collections.Counter = collections.Counter()
        self._stance: Callable[[str], Any] | None = getattr(getattr(torch, "compiler", None), "set_stance", None)
        self.fail_on_recompile = fail_on_recompile and self._stance is not None
        self.warm = False
        # Those the program built, in order (watch_optimizers): each one's class and param groups.
        self.optimizers: list[tuple[str, list]] = []
        if fail_on_recompile and self._stance is None:
            print(
                "recompile-fix: this torch has no torch.compiler.set_stance; --fail-on-recompile is not checked",
                file=sys.stderr,
            )

    # -- registration ---------------------------------------------------------------------
    def register(
        self, kind: str, qualname: str, name: str, file: str | None, line: int | None, source: Any = None
    ) -> dict:
        file = os.path.abspath(file) if file and not file.startswith("<") else (file or "?")
        occurrence = self._seen[(file, qualname)]
        self._seen[(file, qualname)] += 1
        entry = {
            "index": len(self.callables),
            "kind": kind,
            "qualname": qualname,
            "name": name,
            "file": file,
            "line": line or 0,
            "occurrence": occurrence,
            "calls": 0,
            "skipped": 0,
        }
        self.callables.append(entry)
        self.outputs.append([])
        if source is not None:
            self.sources[len(self.callables) - 1] = source
        return entry

    def key(self, entry: dict) -> str:
        base = f"{entry['file']}::{entry['qualname']}" if self.with_file else entry["qualname"]
        return f"{base}#{entry['occurrence']}"

    # -- calls ------------------------------------------------------------------------------
    def call(self, entry: dict, fn, args, kwargs):
        compiler = getattr(self.torch, "compiler", None)
        if compiler is not None and compiler.is_compiling():
            return fn(*args, **kwargs)  # traced from inside another compiled region: not ours
        first = entry["calls"] == 0
        entry["calls"] += 1
        stance = self._stance  # never None where fail_on_recompile is on
        if self.fail_on_recompile and first and stance is not None:
            with stance("default"):
                result = fn(*args, **kwargs)
            if not self.warm:
                self.warm = True
                stance("fail_on_recompile")
        else:
            result = fn(*args, **kwargs)
        try:
            self.record(entry, result, args, kwargs)
        except Exception as exc:  # never break the user's program over bookkeeping
            print(f"recompile-fix: output recorder error: {exc!r}", file=sys.stderr)
        return result

    def record(self, entry: dict, result, args=(), kwargs=None) -> None:
        calls = self.outputs[entry["index"]]
        if len(calls) >= self.max_calls or self.truncated:
            return
        torch = self.torch
        from torch.utils._pytree import tree_leaves

        leaves = tree_leaves(result)
        if not any(isinstance(leaf, torch.Tensor) for leaf in leaves):
            # A call that returns no tensor (a compiled optimizer step, a train step that
            # updates in place): what it changed is the parameters it reached.
            leaves = self._parameters_reached(entry, args, kwargs or {})
        kept = []
        size = 0
        for leaf in leaves:
            if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, type):
                kept.append(torch.tensor(leaf))
                continue
            if not isinstance(leaf, torch.Tensor):
                continue
            tensor = leaf.detach()
            if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.device.type == "meta":
                entry["skipped"] += 1  # a subclass, sparse or meta tensor: not compared
                continue
            size += tensor.numel() * tensor.element_size()
            kept.append(tensor.clone())
        if self.bytes + size > self.max_bytes:
            self.truncated = True
            return
        self.bytes += size
        calls.append(kept)

    def _parameters_reached(self, entry: dict, args, kwargs) -> list:
        """The parameters of the optimizers and modules a call could have updated: among its
        arguments, the object of a bound method (``torch.compile(opt.step)``), and the globals and
        closure cells its code names (``@torch.compile def step(): opt.step()``)."""
        torch = self.torch
        source = self.sources.get(entry["index"])
        holders = [*args, *kwargs.values()]
        owner = getattr(source, "__self__", None)
        if owner is not None:
            holders.append(owner)
        # The function and what it wraps: a decorator under the compile (`@torch.no_grad()`) is
        # the function compiled, and names no global of the user's; the user's is in its closure.
        functions: list[Any] = [source]
        seen: set[int] = set()
        while functions and len(seen) < 8:
            function = functions.pop()
            if id(function) in seen:
                continue
            seen.add(id(function))
            code, names = getattr(function, "__code__", None), getattr(function, "__globals__", None)
            if code is not None and isinstance(names, dict):
                holders.extend(names[n] for n in code.co_names if n in names)
            wrapped = getattr(function, "__wrapped__", None)
            if wrapped is not None:
                functions.append(wrapped)
            for cell in getattr(function, "__closure__", None) or ():
                try:
                    content = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                holders.append(content)
                if callable(content) and hasattr(content, "__code__"):
                    functions.append(content)
        found: dict[int, Any] = {}
        for holder in holders:
            if isinstance(holder, torch.optim.Optimizer):
                params = [p for group in holder.param_groups for p in group["params"]]
            elif isinstance(holder, torch.nn.Module):
                params = list(holder.parameters())
            else:
                continue
            for param in params:
                if isinstance(param, torch.Tensor):
                    found.setdefault(id(param), param)
        return list(found.values())[:_MAX_PARAMETERS]

    def watch_optimizers(self) -> None:
        """Note each optimizer the program builds, in order: ``Optimizer.__init__`` wrapped, as a
        step hook would run inside the compiled step (dynamo traced it, guarded on what it had
        seen, and the step recompiled once in every recorded run). Its param groups are held to
        the end, so that one built and dropped inside `main()` still shows its weights at exit;
        one that never steps compares equal."""
        optimizer_class = self.torch.optim.Optimizer
        original = optimizer_class.__init__
        if getattr(original, "_recompile_fix", False):
            return
        held = self.optimizers

        @functools.wraps(original)
        def init(optimizer, *args, **kwargs):
            original(optimizer, *args, **kwargs)
            if len(held) < _MAX_OPTIMIZERS:
                held.append((type(optimizer).__qualname__, optimizer.param_groups))

        init._recompile_fix = True  # type: ignore[attr-defined]
        optimizer_class.__init__ = init

    def record_final_parameters(self) -> None:
        """The parameters each optimizer that stepped holds when the program ends, as one more
        callable (``<exit>``): what training made of every step, where the first calls kept
        show only the first steps' outputs (a gradient that rounds differently shows here)."""
        torch = self.torch
        for name, param_groups in self.optimizers:
            params = [
                p.detach()
                for group in param_groups
                for p in group.get("params", ())
                if isinstance(p, torch.Tensor) and type(p.detach()) is torch.Tensor and p.layout == torch.strided
            ][:_MAX_PARAMETERS]
            if not params:
                continue
            size = sum(p.numel() * p.element_size() for p in params)
            if self.truncated or self.bytes + size > self.max_bytes:
                return  # a model past the budget: its calls' outputs are compared, not its weights
            self.bytes += size
            entry = self.register("exit", f"{name} parameters at exit", "parameters", "<exit>", 0)
            entry["calls"] = 1
            self.outputs[entry["index"]].append([p.clone() for p in params])

    def record_final_globals(self) -> None:
        """The tensors the program's own module keeps when it ends (a `losses` list, a state
        dict), one callable each (``<exit>``, name ``globals``): what it computed outside compiled
        code too. A fix that changes them differs there (a trial: a float attribute made a 0-d
        float64 tensor turned the loss the training loop computed beside it float64, which the
        compiled outputs and the parameters did not show). Only names bound to a tensor, or to a
        list, tuple or dict that holds tensors alone; within what is left of the byte budget."""
        main = sys.modules.get("__main__")
        names = dict(vars(main)) if main is not None else {}
        kept = 0
        modules_seen: set[int] = set()
        for name in sorted(names):
            value = names[name]
            if name.startswith("_"):
                continue
            if isinstance(value, self.torch.nn.Module):
                # Its parameters (an EMA copy a compiled function updates in place, returning
                # nothing): each once, whichever name holds it first (a compiled wrapper shares
                # the model's). Buffers are left out: a fix may add one (RF006's counter).
                tensors: list | None = [p for p in _module_parameters(self.torch, value) if id(p) not in modules_seen]
                modules_seen.update(id(p) for p in tensors or ())
                label = f"`{name}` parameters at exit"
            else:
                tensors = _plain_tensors(self.torch, value)
                label = f"`{name}` at exit"
            if not tensors:
                continue
            size = sum(t.numel() * t.element_size() for t in tensors)
            if kept >= _MAX_GLOBALS or self.truncated or self.bytes + size > self.max_bytes:
                return
            self.bytes += size
            kept += 1
            entry = self.register("exit", label, "globals", "<exit>", 0)
            entry["calls"] = 1
            self.outputs[entry["index"]].append([t.detach().clone() for t in tensors])

    # -- output -----------------------------------------------------------------------------
    def saveable(self) -> dict:
        """Plain data: strings, numbers, lists and CPU tensors (``weights_only`` loads it)."""
        rank = os.environ.get("RANK")
        return {
            "format": FORMAT,
            "pid": os.getpid(),
            "rank": int(rank) if rank and rank.isdigit() else -1,
            "truncated": self.truncated,
            "fail_on_recompile": self.fail_on_recompile,
            "callables": [{k: v for k, v in e.items() if k != "index"} for e in self.callables],
            "outputs": [[[t.cpu() for t in call] for call in calls] for calls in self.outputs],
        }

    def save(self, path: str) -> None:
        """The tensors with ``torch.save`` at ``path``, and beside it (``.json``) the same record
        without them, for a recompile-fix installed without torch (``load_refs``)."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        data = self.saveable()
        tmp = path + ".tmp"
        self.torch.save(data, tmp)
        os.replace(tmp, path)
        plain = {**data, "outputs": [[len(call) for call in calls] for calls in data["outputs"]]}
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(plain, fh)
        os.replace(tmp, _sidecar(path))

    def by_key(self) -> dict[str, list[list]]:
        return {self.key(e): self.outputs[e["index"]] for e in self.callables}


def _module_parameters(torch, module) -> list:
    """A module's dense parameters, at most ``_MAX_PARAMETERS`` (none where reading them fails)."""
    try:
        params = list(module.parameters())
    except Exception:  # noqa: BLE001 - a module whose parameters() raises: nothing to compare
        return []
    return [
        p for p in params if type(p.detach()) is torch.Tensor and p.layout == torch.strided and p.device.type != "meta"
    ][:_MAX_PARAMETERS]


def _plain_tensors(torch, value) -> list | None:
    """``value``'s tensors where it is a dense tensor, or a list, tuple or dict of them alone."""

    def plain(t) -> bool:
        return (
            isinstance(t, torch.Tensor)
            and type(t.detach()) is torch.Tensor
            and t.layout == torch.strided
            and t.device.type != "meta"
        )

    if plain(value):
        return [value]
    items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else None
    if items and len(items) <= _MAX_GLOBAL_ITEMS and all(plain(t) for t in items):
        return list(items)
    return None


def _code_of(obj):
    import inspect

    try:
        obj = inspect.unwrap(obj)
    except ValueError:
        pass
    return getattr(obj, "__code__", None) or getattr(getattr(obj, "__func__", None), "__code__", None)


def install(torch, recorder: OutputRecorder, *, backend: str | None = None) -> None:
    """Wrap ``torch.compile`` (and so ``nn.Module.compile``) to record what compiled code returns."""
    original = torch.compile
    module_entries: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
    # Inside a compiled module's __call__ (recorded there): its `forward` does not record again.
    in_call = threading.local()

    def compile_recording(*args, **kwargs):
        model = args[0] if args else kwargs.get("model")
        if model is None:  # @torch.compile(...) with options: a decorator
            kwargs.pop("model", None)
            return lambda fn: compile_recording(fn, *args[1:], **kwargs)
        if backend is not None:
            kwargs["backend"] = backend
        compiled = original(*args, **kwargs)
        try:
            return _wrap(model, compiled)
        except Exception as exc:  # an odd callable: run it unrecorded rather than fail
            print(f"recompile-fix: outputs of {model!r} not recorded: {exc!r}", file=sys.stderr)
            return compiled

    def _wrap(model, compiled):
        owner = getattr(model, "__self__", None)
        if isinstance(model, torch.nn.Module):
            if isinstance(compiled, torch.nn.Module):
                code = _code_of(type(model).forward)
                entry = module_entries[compiled] = recorder.register(
                    "module",
                    type(model).__qualname__,
                    code.co_name if code else "forward",
                    code.co_filename if code else None,
                    code.co_firstlineno if code else None,
                )
                # `compiled.forward(tokens, pos)` (meta-llama's generate) runs the compiled code
                # without `__call__`: record it there too.
                forward = compiled.__dict__.get("forward")
                if callable(forward):

                    def forward_recording(*args, **kwargs):
                        if getattr(in_call, "depth", 0):
                            return forward(*args, **kwargs)
                        return recorder.call(entry, forward, args, kwargs)

                    compiled.__dict__["forward"] = forward_recording
            return compiled
        if isinstance(owner, torch.nn.Module) and getattr(model, "__name__", "") == "_call_impl":
            # nn.Module.compile(): torch.compile(self._call_impl); key it by the module's class.
            code = _code_of(type(owner).forward)
            entry = recorder.register(
                "module",
                type(owner).__qualname__,
                code.co_name if code else "forward",
                code.co_filename if code else None,
                code.co_firstlineno if code else None,
            )
        else:
            code = _code_of(model)
            qualname = getattr(model, "__qualname__", None) or type(model).__qualname__
            entry = recorder.register(
                "function",
                qualname,
                code.co_name if code else qualname,
                code.co_filename if code else None,
                code.co_firstlineno if code else None,
                source=model,
            )
        if not callable(compiled):
            return compiled

        @functools.wraps(compiled)
        def call_recording(*args, **kwargs):
            return recorder.call(entry, compiled, args, kwargs)

        return call_recording

    functools.update_wrapper(compile_recording, original)  # its errors name torch.compile, not this
    torch.compile = compile_recording

    optimized = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    optimized = getattr(optimized, "OptimizedModule", None)
    if optimized is not None:
        original_call = optimized.__call__

        def optimized_module_call(self, *args, **kwargs):
            entry = module_entries.get(self)
            if entry is None:
                return original_call(self, *args, **kwargs)
            in_call.depth = getattr(in_call, "depth", 0) + 1
            try:
                return recorder.call(entry, functools.partial(original_call, self), args, kwargs)
            finally:
                in_call.depth -= 1

        optimized.__call__ = optimized_module_call


def install_from_env(torch) -> OutputRecorder | None:
    """Start recording when ``RECOMPILE_FIX_RECORD_OUTPUTS`` names a directory; write at exit."""
    directory = os.environ.get(OUTPUTS_ENV)
    if not directory:
        return None
    calls = os.environ.get(CALLS_ENV, "")
    make_deterministic(torch)
    recorder = OutputRecorder(
        torch,
        max_calls=int(calls) if calls.isdigit() else DEFAULT_CALLS,
        fail_on_recompile=os.environ.get(FAIL_ON_RECOMPILE_ENV) == "1",
    )
    install(torch, recorder)
    try:
        recorder.watch_optimizers()
    except Exception as exc:  # never lose the outputs over the final parameters
        print(f"recompile-fix: could not watch the optimizers: {exc!r}", file=sys.stderr)
    path = os.path.join(directory, f"outputs-{os.getpid()}.pt")

    def write() -> None:
        try:
            recorder.record_final_parameters()
            recorder.record_final_globals()
        except Exception as exc:  # never lose the outputs recorded over the final parameters
            print(f"recompile-fix: could not record the final parameters: {exc!r}", file=sys.stderr)
        try:
            recorder.save(path)
        except Exception as exc:
            print(f"recompile-fix: could not write outputs: {exc!r}", file=sys.stderr)

    atexit.register(write)
    return recorder


def make_deterministic(torch) -> None:
    """torch's deterministic algorithms for this run, warnings only (an op without a deterministic
    kernel warns and runs as before). Set before the program runs, so no compile sees another
    mode (Dynamo guards on it); a program that turns it on or off later does as it says."""
    try:
        if not torch.are_deterministic_algorithms_enabled():
            torch.use_deterministic_algorithms(True, warn_only=True)
    except Exception as exc:  # never break the user's program over it
        print(f"recompile-fix: deterministic algorithms not set: {exc!r}", file=sys.stderr)


def _sidecar(path: str) -> str:
    return path[: -len(".pt")] + ".json" if path.endswith(".pt") else path + ".json"


class TensorRef(NamedTuple):
    """A recorded tensor, not loaded: call ``call`` of callable ``callable`` in the file ``path``
    wrote, its ``position``-th tensor. ``judge_main`` loads it, where torch is."""

    path: str
    callable: int
    call: int
    position: int  # not ``index``, which would hide tuple.index


def load_refs(directory: str) -> list[dict]:
    """As ``load``, with each tensor a ``TensorRef``: the standard library only, for a
    recompile-fix that runs without torch (installed in an environment of its own)."""
    records: list[dict] = []
    if not os.path.isdir(directory):
        return records
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("outputs-") and name.endswith(".pt")):
            continue
        path = os.path.join(directory, name)
        try:
            with open(_sidecar(path), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue  # a process killed mid-write leaves nothing usable
        if isinstance(data, dict) and data.get("format") == FORMAT:
            data["outputs"] = [
                [[TensorRef(path, c, k, i) for i in range(count)] for k, count in enumerate(calls)]
                for c, calls in enumerate(data["outputs"])
            ]
            records.append(data)
    return records


def compare(before, after, *, exact: bool = False, rtol: float | None = None, atol: float | None = None):
    """(same?, max abs difference, what differs) of two recorded tensors: bit for bit
    (``exact``), within ``rtol``/``atol`` (the other one 0), or within
    ``torch.testing.assert_close``'s default tolerances for their dtype. NaN equals NaN; a pair
    that is NaN everywhere in both is the same, and says so (``ALL_NAN``)."""
    import torch

    if before.shape != after.shape:
        return False, None, f"shape {tuple(before.shape)} -> {tuple(after.shape)}"
    if before.dtype != after.dtype:
        return False, None, f"dtype {before.dtype} -> {after.dtype}".replace("torch.", "")
    diff = None
    if before.numel():
        b, a = (
            before.to(torch.complex128 if before.is_complex() else torch.float64),
            after.to(torch.complex128 if after.is_complex() else torch.float64),
        )
        both_nan = b.isnan() & a.isnan()
        # Equal values differ by 0, infinities too (`-inf - -inf` is NaN: a masked score's -inf).
        delta = torch.where(both_nan | (a == b), torch.zeros_like(b), a - b).abs()
        delta = torch.where(delta.isnan(), torch.full_like(delta, float("inf")), delta)
        diff = float(delta.max())
    if exact:
        same = bool(torch.equal(before, after)) or (diff == 0.0)
    else:
        kwargs: dict[str, Any] = {}
        if rtol is not None or atol is not None:
            kwargs = {"rtol": rtol or 0.0, "atol": atol or 0.0}
        try:
            torch.testing.assert_close(after, before, equal_nan=True, **kwargs)
            same = True
        except AssertionError:
            same = False
    if same and before.numel() and bool(both_nan.all()):
        return same, diff, ALL_NAN  # NaN matches NaN: equal, and no evidence of the values
    return same, diff, "" if same else f"max abs diff {diff:.3g}"


def judge_main(request_path: str | None = None) -> None:
    """Compare pairs of ``TensorRef`` in the user's interpreter (the one with torch): reads
    ``{"pairs": [[before, after], ...], "exact", "rtol", "atol"}`` from ``request_path`` (or
    stdin), writes one ``[same, diff, why]`` per pair on stdout (JSON)."""
    import torch

    if request_path is None:
        request = json.load(sys.stdin)
    else:
        with open(request_path, encoding="utf-8") as fh:
            request = json.load(fh)
    files: dict[str, list] = {}

    def tensor(ref):
        path, c, k, i = ref
        if path not in files:
            files[path] = torch.load(path, weights_only=True)["outputs"]
        return files[path][c][k][i]

    tolerance = {key: request.get(key) for key in ("rtol", "atol")}
    results = [
        list(compare(tensor(b), tensor(a), exact=bool(request.get("exact")), **tolerance)) for b, a in request["pairs"]
    ]
    json.dump(results, sys.stdout)


def load(directory: str) -> list[dict]:
    """Every process's record in ``directory`` (what ``OutputRecorder.saveable`` wrote)."""
    import torch

    records: list[dict] = []
    if not os.path.isdir(directory):
        return records
    for name in sorted(os.listdir(directory)):
        if name.startswith("outputs-") and name.endswith(".pt"):
            try:
                data = torch.load(os.path.join(directory, name), weights_only=True)
            except Exception:
                continue  # a process killed mid-write leaves nothing usable
            if isinstance(data, dict) and data.get("format") == FORMAT:
                records.append(data)
    return records
