"""The torch internals the recorder reads, each looked up where it is needed (releases 2.6 to 2.15
differ): a release without one degrades the record, never the user's program. Standard library
only; torch's modules are taken from ``sys.modules`` or imported here on request."""

from __future__ import annotations

import importlib
import sys
import types

__all__ = [
    "GRAPH_BREAK_LOGGER",
    "assigned_compile_ids",
    "current_compile_id",
    "has_compile_context",
    "import_optional",
    "metrics_contexts",
]

GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"


def current_compile_id() -> str | None:
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except Exception:  # no such API in this torch, or no compile under way
        return None
    return None if compile_id is None else str(compile_id)


def assigned_compile_ids() -> int | None:
    """How many compile ids torch has handed out since the last reset (one per compile
    attempt, failed ones too): ``convert_frame.FRAME_COMPILE_COUNTER`` (frame id -> count)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    counter = getattr(convert_frame, "FRAME_COMPILE_COUNTER", None)
    if not isinstance(counter, dict):
        return None
    return sum(v for v in counter.values() if isinstance(v, int))


def metrics_contexts(dynamo_utils: types.ModuleType | None) -> list:
    """torch's MetricsContext objects that exist now: module globals (2.6-2.10) and this
    thread's (2.13+ makes one per thread, on first use)."""
    found = [getattr(dynamo_utils, n, None) for n in ("_METRICS_CONTEXT", "_RUNTIME_METRICS_CONTEXT")]
    local = getattr(dynamo_utils, "_metrics_context_tls", None)
    found += [getattr(local, n, None) for n in ("metrics_context", "runtime_metrics_context")]
    return [c for c in found if c is not None and hasattr(c, "_on_exit")]


def import_optional(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # a torch without this module: the features say what is missing
        return None


def has_compile_context() -> bool:
    try:
        from torch._guards import CompileContext
    except Exception:
        return False
    return callable(getattr(CompileContext, "current_compile_id", None))
