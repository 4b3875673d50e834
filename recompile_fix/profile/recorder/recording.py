"""``Recorder``: what one process compiled, as torch's own bookkeeping reports it.

* every compile's ``CompilationMetrics`` record, from two sources that are deduplicated: the
  exit of torch's ``MetricsContext`` (its ``record_compilation_metrics`` callback, which no
  program replaces) and the metrics deque (hooked on append). A program may swap, cap or clear
  the deque (``set_compilation_metrics_limit``, another tool's subclass): the first source still
  sees every compile, and at exit the deque left in place is scanned for anything unseen;
* ``torch._dynamo.utils.guard_failures``: every cache entry's failure text for each recompile
  (the metrics keep only the first);
* at compile start (the start callback; else when the metrics arrive, torch's ``_compile`` frame
  still on the stack): the user's stack, the frame's arguments (``inputs``), its module's block
  stacks and its backend (``compiled_frame``); when it ends, what its graph did with the sizes
  (``graph_facts``);
* the ``graph_breaks`` artifact log, which names the user file:line of each break.

Compile ids are numbered by *generation*: ``torch._dynamo.reset()`` restarts them (one generation
per reset). At exit the compiles recorded are checked against the compile ids torch handed out
(``convert_frame.FRAME_COMPILE_COUNTER``) and a shortfall is reported, never hidden. Each compile
is also appended to ``part-<pid>.jsonl`` as it is recorded (``part_files``).
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import time
import types
from collections.abc import Iterable
from typing import Any

from recompile_fix.profile.graph_breaks import logging_call, parse_graph_break  # standard library only
from recompile_fix.profile.graph_facts import compiled_graph_dims, float_constant_operands
from recompile_fix.profile.recorder.compiled_frame import compiled_frame_backend, compiled_frame_blocks
from recompile_fix.profile.recorder.hooks import put_back_hooks
from recompile_fix.profile.recorder.inputs import compiled_frame_inputs
from recompile_fix.profile.recorder.internals import assigned_compile_ids, current_compile_id
from recompile_fix.profile.recorder.part_files import (
    PARTS_DIR_ENV,
    PartFile,
    process_header,
    program_import_paths,
    write_record,
)
from recompile_fix.profile.recorder.program_facts import SteadyTimes
from recompile_fix.profile.recorder.stack import user_stack

__all__ = ["Recorder"]


class Recorder:
    """The compiles, graph breaks and facts of this process, and the bookkeeping that keeps the
    record complete (deduplication, generations, hooks put back, the exit cross-check)."""

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
        self.torch_version: str | None = None
        self.backward_ran = False
        # Each metrics record is keyed (compile id, start time, forward?), so that the two
        # sources and the exit scan never count one compile twice.
        self.seen: set[tuple] = set()
        self.recorded_ids: set[tuple] = set()  # (generation, compile id) of forward records
        # torch._dynamo.reset() restarts compile ids at 0/0: each reset starts a generation.
        self.generation = 0
        self.assigned_before = 0  # compile ids torch handed out in earlier generations
        self.last_assigned = 0  # the last count of this generation's compile ids we saw
        self.sources: collections.Counter[str] = collections.Counter()
        self.events: list[str] = []
        self.features: dict[str, bool] = {}
        self.part = PartFile(self.header)
        self._in_ensure = False
        self.expect_cleared_callbacks = False
        self.compile_starts = 0  # a call during which this moved compiled something: not steady
        self.steady = SteadyTimes()

    # -- torch hooks -------------------------------------------------------------------
    def on_compile_start(self, *args: Any) -> None:
        self.compile_starts += 1
        self.ensure_hooks()
        self._check_generation()
        # torch >= 2.8 passes CallbackArgs(callback_trigger, compile_id); 2.6 passes nothing,
        # and runs the callback inside the compile's CompileContext.
        compile_id = getattr(args[0], "compile_id", None) if args else current_compile_id()
        key = (self.generation, str(compile_id))
        self.start_stacks[key] = user_stack(2)
        self.start_inputs[key] = compiled_frame_inputs()
        try:
            self.start_blocks[key] = compiled_frame_blocks()
        except Exception:  # never break the user's program over bookkeeping
            self.start_blocks[key] = []
        try:
            self.start_backends[key] = compiled_frame_backend()
        except Exception:  # never break the user's program over bookkeeping
            self.start_backends[key] = None

    def on_context_exit(self, start_time_ns: object, metrics: dict, exc_type: type | None, exc_value: object) -> None:
        """The record torch builds (``CompilationMetrics.create``), from the arguments torch's
        ``MetricsContext`` passes its exit callback: it reaches us whatever deque (or none) the
        program left in place."""
        compile_id = metrics.get("compile_id") or current_compile_id()
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

    def on_metrics(self, metrics: Any, source: str = "deque") -> None:
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
                self.new_generation(f"compile id {compile_id} given out again: torch's compile ids restarted")
        self.sources[source] += 1
        if forward:
            self.recorded_ids.add((self.generation, compile_id))
        new_reasons, frame = self._new_guard_failures() if live else ([], None)
        compile_ = {
            "compile_id": compile_id,
            "generation": self.generation,
            "source": source,
            "frame": _metrics_frame(metrics) or frame,
            "is_forward": forward,
            "recompile_reason": getattr(metrics, "recompile_reason", None),
            "guard_failures": new_reasons,
            "fail_type": getattr(metrics, "fail_type", None),
            "fail_reason": getattr(metrics, "fail_reason", None),
            "restart_reasons": sorted(getattr(metrics, "restart_reasons", None) or []),
            **self._compile_facts(compile_id, live, forward),
            "seconds": _compile_seconds(metrics),
        }
        self.compiles.append(compile_)
        self.part.append("compile", compile_)
        if live:
            self.ensure_hooks()

    def _new_guard_failures(self) -> tuple[list[str], dict | None]:
        """The guard-failure texts appended since the last record, and the frame they are of:
        they belong to this compile (torch computes them just before it compiles, or before it
        gives up at the recompile limit)."""
        new_reasons: list[str] = []
        frame = None
        guard_failures = getattr(sys.modules.get("torch._dynamo.utils"), "guard_failures", None)
        if not isinstance(guard_failures, dict):
            return new_reasons, frame
        for code, failures in list(guard_failures.items()):
            before = self.seen_failures.get(code, 0)
            if len(failures) < before:  # the list was cleared (torch._dynamo.reset())
                before = 0
            if len(failures) > before:
                new_reasons.extend(failures[before:])
                frame = {"file": os.path.abspath(code.co_filename), "line": code.co_firstlineno, "name": code.co_name}
            self.seen_failures[code] = len(failures)
        return new_reasons, frame

    def _compile_facts(self, compile_id: str, live: bool, forward: bool) -> dict:
        """The stack, arguments, block stacks, backend and graph dims of a compile: what the
        start callback saw, else (a live record) read now."""
        start_key = (self.generation, compile_id)
        stack = self.start_stacks.pop(start_key, None) or (user_stack(4) if live else [])
        # The start callback can be missing (cleared by the program or by reset()): torch's
        # _compile frame is still on the stack here and holds the arguments.
        inputs = self.start_inputs.pop(start_key, None) or (compiled_frame_inputs() if live else {})
        blocks = self.start_blocks.pop(start_key, None) or []
        backend = self.start_backends.pop(start_key, None)
        # The graph's own word on the sizes it took (dynamic, or specialised and why).
        dims = compiled_graph_dims() if live and forward else None
        floats = float_constant_operands() if live and forward else None
        if backend is None and live:
            try:
                backend = compiled_frame_backend()
            except Exception:  # never break the user's program over bookkeeping
                backend = None
        facts: dict[str, Any] = {"stack": stack, "inputs": inputs, "blocks": blocks, "backend": backend, "dims": dims}
        if floats:
            facts["float_operands"] = floats
        return facts

    def on_graph_break_log(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a log record we cannot format is not worth failing the run
            return
        graph_break = parse_graph_break(text)
        if graph_break is None:
            return
        file, line, reason = graph_break
        compile_id = current_compile_id()
        graph_break_ = {
            "compile_id": None if compile_id is None else str(compile_id),
            "generation": self.generation,
            "file": os.path.abspath(file),
            "line": line,
            "reason": reason,
        }
        logger = logging_call(text)
        if logger is not None:
            graph_break_["logger"], graph_break_["logger_method"] = logger
        self.graph_breaks.append(graph_break_)
        self.part.append("graph_break", graph_break_)

    # -- generations (torch._dynamo.reset()) ------------------------------------------------
    def _check_generation(self) -> None:
        """A drop in the compile ids torch has handed out means they were reset."""
        assigned = assigned_compile_ids()
        if assigned is None:
            return
        if assigned < self.last_assigned:
            self.new_generation(f"torch's compile ids restarted ({self.last_assigned} handed out, now {assigned})")
        self.last_assigned = assigned

    def before_reset(self) -> None:
        assigned = assigned_compile_ids()
        if assigned is not None:
            self.last_assigned = max(self.last_assigned, assigned)

    def new_generation(self, why: str) -> None:
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
            put_back_hooks(self)
        except Exception as exc:  # never break the user's program over bookkeeping
            print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)
        finally:
            self._in_ensure = False

    def note_event(self, text: str) -> None:
        """Something the recorder had to repair (said once)."""
        if text not in self.events:
            self.events.append(text)

    def scan(self, records: Iterable[Any], source: str) -> None:
        for metrics in list(records):
            try:
                self.on_metrics(metrics, source=source)
            except Exception as exc:
                print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)

    # -- the cross-check ----------------------------------------------------------------------
    def reconcile(self) -> dict:
        """At exit: the compiles recorded against the compile ids torch handed out (every
        compile attempt gets one, a failed one at the recompile limit too)."""
        dynamo_utils = sys.modules.get("torch._dynamo.utils")
        current = getattr(dynamo_utils, "_compilation_metrics", None)
        if isinstance(current, collections.deque):
            self.scan(current, "exit-scan")  # the last fallback: whatever the deque still holds
        assigned = assigned_compile_ids()
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
        return process_header(self.torch_version)

    def write(self, exit_info: dict) -> None:
        parts_dir = os.environ.get(PARTS_DIR_ENV)
        if not parts_dir:
            return
        record = {
            **self.header(),
            "compiles": self.compiles,
            "graph_breaks": self.graph_breaks,
            "backward_ran": self.backward_ran,
            "import_paths": program_import_paths(),
            "recorder": self.reconcile(),
            "exit": exit_info,
            "wall_seconds": time.time() - self.started,
            "steady": self.steady.summary(),
        }
        write_record(parts_dir, record)
        self.part.remove()  # the complete record replaces what was written as we went

    def after_fork_in_child(self) -> None:
        """A forked child records its own compiles only (the parent's are in the parent's file)."""
        self.compiles, self.graph_breaks = [], []
        self.steady = SteadyTimes()
        self.start_stacks, self.start_inputs = {}, {}
        self.start_backends = {}
        self.seen_failures, self.seen, self.recorded_ids = {}, set(), set()
        self.sources = collections.Counter()
        self.part = PartFile(self.header)


def _metrics_frame(metrics: Any) -> dict | None:
    """The compiled frame a metrics record names (its code's file, first line and name)."""
    if not getattr(metrics, "co_name", None):
        return None
    return {"file": os.path.abspath(metrics.co_filename), "line": metrics.co_firstlineno, "name": metrics.co_name}


def _compile_seconds(metrics: Any) -> dict:
    """Dynamo's, the backend's and inductor's compile seconds (microseconds in newer releases)."""

    def seconds(us_field: str, s_field: str) -> float | None:
        us = getattr(metrics, us_field, None)
        if us is not None:
            return us / 1e6
        return getattr(metrics, s_field, None)

    return {
        "dynamo": seconds("dynamo_cumulative_compile_time_us", "entire_frame_compile_time_s"),
        "backend": seconds("aot_autograd_cumulative_compile_time_us", "backend_compile_time_s"),
        "inductor": seconds("inductor_cumulative_compile_time_us", "inductor_compile_time_s"),
    }
