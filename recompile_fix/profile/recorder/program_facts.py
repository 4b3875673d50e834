"""Facts about the program beside its compiles, noted by wrapping torch's API once at install:

* whether it ran a backward pass (``torch.autograd.backward``/``grad``, which ``Tensor.backward``
  calls): a fact about the program that later edits do not change;
* the wall time of each call of a ``torch.compile(module)`` wrapper during which nothing compiled
  (its steady state): what a compile-time fix that adds eager work per block would cost the
  program (RF004 / RF007's choice);
* that a job id would have PGO read an earlier run's state (``first_run_compiles``).
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recompile_fix.profile.recorder.recording import Recorder

__all__ = ["SteadyTimes", "first_run_compiles", "note_backward", "time_compiled_modules"]

_MAX_STEADY_SAMPLES = 200  # call times kept per compiled module (the median of these is written)


def note_backward(torch: types.ModuleType, recorder: Recorder) -> None:
    """Note the first backward pass, where the autograd engine is called. The wrappers' frames are skipped by dynamo (it would compile
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

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def noted(*args, **kwargs):
            # A backend compiling a graph (AOT autograd tracing the joint graph) calls grad too.
            if not recorder.backward_ran and TracingContext.try_get() is None:
                recorder.backward_ran = True
            return original(*args, **kwargs)

        skip_code(noted.__code__)
        noted.__wrapped__ = original  # type: ignore[attr-defined]
        noted.__name__, noted.__qualname__, noted.__doc__ = original.__name__, original.__qualname__, original.__doc__
        return noted

    if callable(getattr(autograd, "_engine_run_backward", None)):
        # What both `backward` and `grad` call (torch >= 2.3): the public functions stay torch's
        # own, which dynamo recognises (`trace_autograd_ops=True` traces `torch.autograd.grad`;
        # a wrapper in its place broke the graph there, and named the tool's file as the break).
        autograd._engine_run_backward = wrap(autograd._engine_run_backward)
    else:
        autograd.backward = wrap(autograd.backward)
        autograd.grad = wrap(autograd.grad)


def first_run_compiles(torch: types.ModuleType, recorder: Recorder) -> None:
    """With a job id (``TORCH_COMPILE_JOB_ID``), torch's profile-guided dynamism (PGO) reads an
    earlier run's state from its cache dir and writes this run's back: a second run compiles less
    than the first, until a file changes. A recorded run compiles as a first run does, and writes
    nothing there: a Profile shows the recompiles PGO hides until then (the ones an edit removes
    for good), and `verify`'s two runs (an edited file's PGO state no longer applies) compare alike."""
    config = getattr(getattr(torch, "_dynamo", None), "config", None)
    compiler_config = getattr(getattr(torch, "compiler", None), "config", None)
    job_id = getattr(compiler_config, "job_id", None) or os.environ.get("TORCH_COMPILE_JOB_ID")
    if config is None or not job_id or not getattr(config, "automatic_dynamic_local_pgo", False):
        return
    config.automatic_dynamic_local_pgo = False
    recorder.note_event(
        f"TORCH_COMPILE_JOB_ID={job_id}: PGO's state was neither read nor written; the run compiles as a "
        "first run does (PGO's second run hides the recompiles these fixes remove, until a file changes)"
    )


def time_compiled_modules(recorder: Recorder) -> None:
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
            recorder.steady.note(key, time.perf_counter() - began, time.thread_time() - began_cpu)
        return result

    timed_call._recompile_fix = True  # type: ignore[attr-defined]
    timed_call.__wrapped__ = original  # type: ignore[attr-defined]
    module_class.__call__ = timed_call


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


class _ModuleCalls:
    """One compiled module's steady calls: how many, and the times of the first ones."""

    __slots__ = ("count", "cpus", "walls")

    def __init__(self) -> None:
        self.count = 0
        self.walls: list[float] = []
        self.cpus: list[float] = []


class SteadyTimes:
    """Per compiled module's forward, keyed (file, first line, name): the calls that compiled
    nothing, and the wall and CPU seconds of the first ``_MAX_STEADY_SAMPLES`` of them."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, int, str], _ModuleCalls] = {}

    def note(self, key: tuple[str, int, str], seconds: float, cpu_seconds: float) -> None:
        calls = self.calls.setdefault(key, _ModuleCalls())
        calls.count += 1
        if len(calls.walls) < _MAX_STEADY_SAMPLES:
            calls.walls.append(seconds)
            calls.cpus.append(cpu_seconds)

    def summary(self) -> list[dict]:
        """Per compiled module's forward: calls that compiled nothing, the median wall seconds of
        one, and the calling thread's CPU seconds of the fastest (load only ever adds to it)."""
        return [
            {
                "file": file,
                "line": line,
                "name": name,
                "calls": calls.count,
                "seconds": _median(calls.walls),
                "cpu_seconds": min(calls.cpus) if calls.cpus else None,
            }
            for (file, line, name), calls in self.calls.items()
        ]
