"""The recorder's hooks into torch's bookkeeping, and putting them back on each compile.

Programs rearrange that bookkeeping: ``torch._dynamo.reset()`` clears the compile callbacks,
``set_compilation_metrics_limit`` makes a new metrics deque, another tool swaps in its own,
``logging.config`` disables loggers, ``torch._logging.set_logs()`` resets artifact levels. Each
hook is checked and, where it is gone, put back (``put_back_hooks``), and what had to be repaired
is noted as an event of the record.
"""

from __future__ import annotations

import collections
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from recompile_fix.profile.recorder.internals import GRAPH_BREAK_LOGGER, metrics_contexts

if TYPE_CHECKING:
    from recompile_fix.profile.recorder.recording import Recorder

__all__ = ["RecordingDeque", "put_back_hooks", "wrap_reset"]


def _wrap_on_exit(original: Callable[..., Any], recorder: Recorder) -> Callable[..., Any]:
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


def wrap_reset(original: Callable[..., Any], recorder: Recorder) -> Callable[..., Any]:
    """``torch._dynamo.reset()``: compile ids restart, so a new generation starts; the callbacks
    it clears are registered again at once."""

    def reset(*args, **kwargs):
        recorder.before_reset()
        try:
            return original(*args, **kwargs)
        finally:
            recorder.new_generation("torch._dynamo.reset()")
            recorder.expect_cleared_callbacks = True  # reset() clears them: no news
            recorder.ensure_hooks()
            recorder.expect_cleared_callbacks = False

    reset._recompile_fix = True  # type: ignore[attr-defined]
    reset.__wrapped__ = original  # type: ignore[attr-defined]
    reset.__doc__ = getattr(original, "__doc__", None)
    return reset


class _GraphBreakHandler(logging.Handler):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__(logging.DEBUG)
        self.recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        self.recorder.on_graph_break_log(record)


class RecordingDeque(collections.deque):
    """torch's metrics deque with a hook on append; it keeps the cap the program set."""

    recorder: Recorder | None = None

    def append(self, item: Any) -> None:  # noqa: D401
        super().append(item)
        if self.recorder is not None:
            try:
                self.recorder.on_metrics(item, source="deque")
            except Exception as exc:  # never break the user's program over bookkeeping
                print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)


def put_back_hooks(recorder: Recorder) -> None:
    """Put back every hook the program (or torch) took away."""
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    if dynamo_utils is None:
        return
    _hook_metrics_callbacks(recorder, dynamo_utils)
    _hook_metrics_deque(recorder, dynamo_utils)
    _hook_compile_start(recorder)
    _hook_graph_break_log(recorder)
    _keep_graph_break_log_enabled()


def _hook_metrics_callbacks(recorder: Recorder, dynamo_utils: Any) -> None:
    # MetricsContext's exit callback: module-global contexts (2.6-2.10) are patched in place;
    # the module's record_compilation_metrics is what per-thread contexts (2.13+) get.
    for context in metrics_contexts(dynamo_utils):
        on_exit = getattr(context, "_on_exit", None)
        if callable(on_exit) and not getattr(on_exit, "_recompile_fix", False):
            context._on_exit = _wrap_on_exit(on_exit, recorder)
    original = getattr(dynamo_utils, "record_compilation_metrics", None)
    if callable(original) and not getattr(original, "_recompile_fix", False):
        dynamo_utils.record_compilation_metrics = _wrap_on_exit(original, recorder)


def _hook_metrics_deque(recorder: Recorder, dynamo_utils: Any) -> None:
    current = getattr(dynamo_utils, "_compilation_metrics", None)
    if isinstance(current, collections.deque) and not isinstance(current, RecordingDeque):
        recorder.scan(current, "deque-scan")
        if type(current) is collections.deque:
            # set_compilation_metrics_limit() made a new plain one: hook it, keeping its cap.
            hooked = RecordingDeque(current, maxlen=current.maxlen)
            hooked.recorder = recorder
            dynamo_utils._compilation_metrics = hooked
            recorder.note_event(
                f"torch's metrics deque was replaced by the program (maxlen {current.maxlen}): hooked again"
            )
        else:
            recorder.note_event(
                f"another tool's {type(current).__name__} holds torch's metrics: read at each compile, not replaced"
            )


def _hook_compile_start(recorder: Recorder) -> None:
    callback_module = sys.modules.get("torch._dynamo.callback")
    handler = getattr(callback_module, "callback_handler", None)
    starts = getattr(handler, "start_callbacks", None)
    if isinstance(starts, list) and recorder.on_compile_start not in starts:
        register = getattr(handler, "register_start_callback", None)
        if callable(register):
            register(recorder.on_compile_start)
            if recorder.features.get("compile_start_callback_registered") and not recorder.expect_cleared_callbacks:
                recorder.note_event("the compile-start callbacks were cleared: ours registered again")
            recorder.features["compile_start_callback_registered"] = True


def _hook_graph_break_log(recorder: Recorder) -> None:
    logger = logging.getLogger(GRAPH_BREAK_LOGGER)
    if not any(isinstance(h, _GraphBreakHandler) and h.recorder is recorder for h in logger.handlers):
        logger.addHandler(_GraphBreakHandler(recorder))
        if recorder.features.get("graph_break_handler_added"):
            recorder.note_event("our graph-break log handler was removed: added again")
        recorder.features["graph_break_handler_added"] = True
    if logger.disabled and not logger.propagate:
        # logging.config disabled it; with propagation off only our handler hears it.
        logger.disabled = False
        recorder.note_event("the graph-break logger was disabled (logging.config): enabled again for our handler")


def _keep_graph_break_log_enabled() -> None:
    # torch._logging.set_logs() (called by user code) resets artifact levels; re-assert ours.
    logger = logging.getLogger(GRAPH_BREAK_LOGGER)
    if logger.level > logging.DEBUG or logger.level == logging.NOTSET:
        # Off (the user did not ask for TORCH_LOGS=graph_breaks): turn it on for our handler
        # only, so the program's stderr stays as it would be without us.
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
