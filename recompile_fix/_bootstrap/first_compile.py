"""The warm runner's server compiles once, then undoes it: what Dynamo builds on the first trace
of a process (its tracer's tables, symbolic shapes' and sympy's caches, modules it imports
lazily: 30-110 ms of a small program's CPU on a 2-core machine, every run, bench/first_compile.py)
is built before the fork, and each child starts from the state a fresh process starts from:
compile ids, frame counts, counters, compilation metrics and the generated names
(``__compiled_fn_N``) start again; torch's thread-local state is as it was (this thread's
metrics context is made on a first compile with the ``record_compilation_metrics`` of that
moment: a harness that replaces it before its first compile must still be heard); a warning
already shown is shown again. The model lives on the meta device: no kernel runs (no thread pool
is started in the server, whose children could not use it) and nothing draws from torch's
random generator.

It runs inside the user's interpreter (standard library and torch only). Skipped where a variable
makes a compile leave more behind than memory (a trace folder, logs, a PGO job's state, Dynamo's
own settings); where undoing fails, the server refuses and the runs are cold.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import warnings
from typing import Any

__all__ = ["compile_once"]

# Variables under which a compile writes somewhere or is configured: no warm-up compile there.
_LEAVES_MORE = ("TORCH_LOGS", "TORCH_TRACE", "TORCH_COMPILE", "TORCHDYNAMO", "TORCH_DYNAMO")

# Module counters a compile advances and torch._dynamo.reset() does not: (module, name, first).
_COUNTERS = (
    ("torch._dynamo.bytecode_transformation", "_unique_id_counter", 0),  # __compiled_fn_N, resume fns
    ("torch._dynamo.output_graph", "_compile_id_counter", 0),
    # "Step N: ..." in Dynamo's INFO log (seen only with TORCH_LOGS, which skips the warm-up);
    # modules the first trace imports take numbers at import, so a fresh process's are not kept.
    ("torch._dynamo.logging", "_step_counter", 1),
    ("torch._dynamo.utils", "timer_counter", 0),
    ("torch._dynamo.eval_frame", "_next_isolate_recompiles_id", 0),
)
# Containers of per-compile records (keyed by compile id, or counted) that reset() leaves.
_RECORDS = (
    ("torch._dynamo.utils", "counters"),
    ("torch._dynamo.utils", "_compilation_metrics"),
    ("torch._dynamo.utils", "compilation_time_metrics"),
    ("torch._logging._internal", "structured_logging_overhead"),
    ("torch._logging.structured", "INTERN_TABLE"),
    ("torch.utils._stats", "simple_call_counter"),
)


def compile_once() -> bool:
    """Compile a small model (eager backend) and undo what the compile left. False: the undoing
    failed, and this process must not serve runs."""
    if any(name.startswith(_LEAVES_MORE) for name in os.environ):
        return True
    import torch

    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or not hasattr(torch, "compile"):
        return True
    handler = getattr(sys.modules.get("torch._dynamo.callback"), "callback_handler", None)
    callbacks = [list(getattr(handler, name, [])) for name in ("start_callbacks", "end_callbacks")]
    rng = torch.get_rng_state()
    thread_state = _thread_locals()
    # The compile-event logger torch makes on first use (its id and per-thread event stack).
    chromium: Any = getattr(sys.modules.get("torch._dynamo.utils"), "CHROMIUM_EVENT_LOG", None)
    if isinstance(getattr(chromium, "tls", None), threading.local):
        thread_state.append((chromium.tls, dict(vars(chromium.tls))))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _compile_a_model(torch)
    except Exception:  # noqa: BLE001 - a torch this does not fit: the runs pay, as cold ones do
        pass
    try:
        dynamo.reset()
        for module, name, first in _COUNTERS:
            if hasattr(sys.modules.get(module), name):
                setattr(sys.modules[module], name, itertools.count(first))
        for module, name in _RECORDS:
            records: Any = getattr(sys.modules.get(module), name, None)
            if hasattr(records, "clear"):
                records.clear()
        utils: Any = sys.modules["torch._dynamo.utils"]
        if isinstance(getattr(utils, "op_count", None), int):
            utils.op_count = 0
        _reset_fake_tensor_stats(sys.modules.get("torch._subclasses.fake_tensor"))
        meta_utils = sys.modules.get("torch._subclasses.meta_utils")
        if isinstance(getattr(meta_utils, "DESCRIBER_NEXT_ID", None), int):
            meta_utils.DESCRIBER_NEXT_ID = 0  # type: ignore[union-attr]
        for name, kept in zip(("start_callbacks", "end_callbacks"), callbacks):
            if isinstance(getattr(handler, name, None), list):
                getattr(handler, name)[:] = kept  # reset() cleared them
        for local, before in thread_state:
            for name in [n for n in vars(local) if n not in before]:
                delattr(local, name)
            for name, value in before.items():
                setattr(local, name, value)
        if chromium is None and hasattr(utils, "CHROMIUM_EVENT_LOG"):
            utils.CHROMIUM_EVENT_LOG = None  # made by this compile: the program's makes its own
        torch.set_rng_state(rng)
        warnings._filters_mutated()  # type: ignore[attr-defined]  # "once" registries start again
    except Exception:  # noqa: BLE001 - state we could not put back: serve nothing
        return False
    return True


def _thread_locals() -> list[tuple[threading.local, dict[str, Any]]]:
    """torch's module-level thread-local objects, with what this thread holds in each."""
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a deprecated module attribute warns when looked at
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith("torch"):
                continue
            for value in list(vars(module).values()):
                if isinstance(value, threading.local):
                    found.append((value, dict(vars(value))))
    return found


def _compile_a_model(torch) -> None:
    """A block as models are made of (embedding, linear, norm, activation, softmax, an int
    argument), on the meta device, called at two sizes: the second call traces with dynamic
    shapes."""
    meta = torch.device("meta")

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(8, 4, device=meta)
            self.proj = torch.nn.Linear(4, 4, device=meta)
            self.norm = torch.nn.LayerNorm(4, device=meta)

        def forward(self, ids, x, scale: int):
            h = torch.nn.functional.gelu(self.norm(self.proj(x + self.embed(ids))))
            return torch.softmax(h * scale, dim=-1).sum(0) + h.mean()

    block = torch.compile(Block(), backend="eager")
    for size in (2, 3):
        block(torch.zeros(size, dtype=torch.long, device=meta), torch.ones(size, 4, device=meta), size)


def _reset_fake_tensor_stats(fake_tensor) -> None:
    mode = getattr(fake_tensor, "FakeTensorMode", None)
    for name in ("cache_hits", "cache_misses"):
        if isinstance(getattr(mode, name, None), int):
            setattr(mode, name, 0)
    bypasses: Any = getattr(mode, "cache_bypasses", None)
    if hasattr(bypasses, "clear"):
        bypasses.clear()
