"""A stand-in for torch, small enough to run a generated program in a millisecond: what the fuzz
suite's fast lane (tests/test_fuzz_programs.py) runs each program and its rewrite under, to
compare what they compute without compiling anything. It does arithmetic on lists of floats,
and it checks what the fixes call: a dimension marked dynamic must exist on a tensor, and the
tensor marked must be the one passed to the compiled function afterwards (a mark on the wrong
argument, as `x_1 = "sum"` was, fails here).

    namespace = run_program(source_text)  # {"results": ..., "stdout": ..., "error": ...}
"""

from __future__ import annotations

import builtins
import contextlib
import io
import types
from typing import Any


class FakeTensor:
    def __init__(self, values, shape: tuple[int, ...]):
        self.values = tuple(float(v) for v in values)
        self.shape = tuple(shape)

    # -- shape ----------------------------------------------------------------------------
    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        return iter(FakeTensor([v], ()) for v in self.values)

    def __getitem__(self, index):
        if not self.shape:
            raise IndexError("invalid index of a 0-d tensor")
        return FakeTensor([self.values[index]], ())

    # -- values ---------------------------------------------------------------------------
    def _map(self, other, op):
        if isinstance(other, FakeTensor):
            if not other.shape:
                return FakeTensor([op(v, other.values[0]) for v in self.values], self.shape)
            if not self.shape:
                return FakeTensor([op(self.values[0], v) for v in other.values], other.shape)
            if other.shape != self.shape:
                raise RuntimeError(f"shapes {self.shape} and {other.shape} do not broadcast")
            return FakeTensor([op(a, b) for a, b in zip(self.values, other.values)], self.shape)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return FakeTensor([op(v, other) for v in self.values], self.shape)
        return NotImplemented

    def __add__(self, other):
        return self._map(other, lambda a, b: a + b)

    def __radd__(self, other):
        return self._map(other, lambda a, b: b + a)

    def __sub__(self, other):
        return self._map(other, lambda a, b: a - b)

    def __rsub__(self, other):
        return self._map(other, lambda a, b: b - a)

    def __mul__(self, other):
        return self._map(other, lambda a, b: a * b)

    def __rmul__(self, other):
        return self._map(other, lambda a, b: b * a)

    def __truediv__(self, other):
        return self._map(other, lambda a, b: a / b)

    def __neg__(self):
        return FakeTensor([-v for v in self.values], self.shape)

    def sum(self):
        return FakeTensor([sum(self.values)], ())

    def item(self) -> float:
        if self.shape:
            raise RuntimeError("a Tensor with more than one element cannot be converted to Scalar")
        return self.values[0]

    def __float__(self) -> float:
        return self.item()

    def __bool__(self) -> bool:
        return bool(self.item())

    def __lt__(self, other):
        return self.item() < other

    def __gt__(self, other):
        return self.item() > other

    def clone(self, memory_format=None):
        return FakeTensor(self.values, self.shape)

    def contiguous(self):
        return self

    def tolist(self):
        return list(self.values) if self.shape else self.values[0]

    def __repr__(self) -> str:
        return f"tensor({self.tolist()})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self) if not spec else format(self.item(), spec)


def snapshot(value: Any) -> Any:
    """Values as plain data, for comparing two runs."""
    if isinstance(value, FakeTensor):
        return ("tensor", value.shape, value.values)
    if isinstance(value, (list, tuple)):
        return [snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    return value


class _Dims:
    """What the fixes called: marks, and the arguments each compiled call got."""

    def __init__(self):
        self.events: list[tuple[str, Any]] = []
        self.made = 0  # tensors torch.ones made


def make_torch(log: _Dims) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.float32, torch.float64, torch.int64 = "float32", "float64", "int64"
    torch.contiguous_format = "contiguous_format"
    torch.Tensor = FakeTensor

    def ones(*shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        count = 1
        for size in shape:
            count *= size
        log.made += 1
        return FakeTensor([1.0] * count, shape)

    def full(shape, value):
        return FakeTensor([value] * (shape[0] if shape else 1), tuple(shape))

    def tensor(value, dtype=None):
        if isinstance(value, FakeTensor):
            return value.clone()
        return FakeTensor([value], ())

    def compile(fn=None, **kwargs):
        if fn is None:
            return lambda f: compile(f, **kwargs)

        def compiled(*args, **kw):
            log.events.append(("call", [id(a) for a in (*args, *kw.values())]))
            return fn(*args, **kw)

        return compiled

    def mark(kind):
        def marker(t, dims):
            if not isinstance(t, FakeTensor):
                raise TypeError(f"{kind}: {t!r} is not a tensor")
            for d in [dims] if isinstance(dims, int) else dims:
                if not 0 <= d < t.dim():
                    raise IndexError(f"{kind}: dimension {d} of a {t.dim()}-d tensor")
            log.events.append(("mark", id(t)))

        return marker

    dynamo = types.ModuleType("torch._dynamo")
    dynamo.mark_dynamic = mark("mark_dynamic")
    dynamo.maybe_mark_dynamic = mark("maybe_mark_dynamic")
    dynamo.decorators = types.SimpleNamespace(mark_unbacked=mark("mark_unbacked"))
    dynamo.graph_break = lambda: None
    torch._dynamo = dynamo
    torch.compiler = types.SimpleNamespace(nested_compile_region=lambda f: f)
    torch.ones, torch.full, torch.tensor, torch.compile = ones, full, tensor, compile
    return torch


def run_program(text: str, filename: str = "program.py", optimize: int = -1) -> dict[str, Any]:
    """Run ``text`` with this torch; what it computed (its RESULTS and stdout), the error it
    raised, whether every mark was on a tensor the compiled function got next, and how many
    tensors ``torch.ones`` made (a value made on a path that never made it: a hoisted argument).
    ``optimize=1``: as ``python -O`` runs it (no ``assert``)."""
    log = _Dims()
    torch = make_torch(log)
    real_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "torch" or name.startswith("torch."):
            return torch
        return real_import(name, globals, locals, fromlist, level)

    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__file__": filename,
        "__builtins__": {**vars(builtins), "__import__": import_},
    }
    out = io.StringIO()
    error = None
    try:
        code = compile(text.lstrip("\ufeff"), filename, "exec", dont_inherit=True, optimize=optimize)
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
    except Exception as exc:  # noqa: BLE001 - the program's own error, compared between runs
        error = f"{type(exc).__name__}: {exc}"
    pending: set[int] = set()
    misplaced = 0
    for kind, value in log.events:
        if kind == "mark":
            pending.add(value)
        else:
            pending -= set(value)
    misplaced = len(pending)  # marked, never passed to the compiled function after
    return {
        "results": snapshot(namespace.get("RESULTS")),
        "stdout": out.getvalue(),
        "error": error,
        "marks": sum(1 for kind, _ in log.events if kind == "mark"),
        "misplaced_marks": misplaced,
        "made": log.made,
    }
