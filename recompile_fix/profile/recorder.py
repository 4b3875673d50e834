"""The in-process recorder: runs inside the user's Python process and writes one raw record file.

It is loaded by ``_bootstrap/sitecustomize.py`` and waits until the program imports torch; a
program that never imports torch pays nothing. Everything it reads is torch's own bookkeeping:

* every ``CompilationMetrics`` record, as torch appends it (frame, compile id, seconds, the
  limit-hit failure record, which carries no frame name);
* ``torch._dynamo.utils.guard_failures``: every cache entry's failure text for each recompile
  (the metrics keep only the first);
* the Python stack when the compile starts (the metrics' own stack drops the caller), with the
  column span of the calling expression so the rewrite can find the exact call;
* the ``graph_breaks`` artifact log, which names the user file:line of each break.

It uses only the standard library and torch, writes JSON (never pickles) and asks torch to write
no files. The raw record is typed and merged into a Profile by ``recompile_fix.profile_run``.
"""

from __future__ import annotations

import atexit
import collections
import importlib.abc
import importlib.util
import json
import logging
import os
import sys
import time

from recompile_fix.profile.graph_breaks import parse_graph_break  # standard library only, as all of this file

__all__ = ["BACKEND_ENV", "PARTS_DIR_ENV", "install", "install_when_torch_imported", "user_stack"]

PARTS_DIR_ENV = "RECOMPILE_FIX_PARTS_DIR"
BACKEND_ENV = "RECOMPILE_FIX_BACKEND"

# Frames from these trees are torch's (or ours), never the user's call site.
_TORCH_DIR = None
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the recompile_fix package
# The standard library's wrappers (contextlib, functools, runpy) are never the user's call site.
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_MAX_STACK = 12
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
        return {
            "type": "Tensor",
            "shape": list(value.shape),
            "stride": list(value.stride()),
            "dtype": str(value.dtype).replace("torch.", ""),
        }
    if isinstance(value, (bool, int, float)) and not isinstance(value, type):
        return {"type": type(value).__name__, "value": value}
    return None


def _compiled_frame_inputs() -> dict:
    """Shapes and scalar values of the arguments of the frame being compiled. Guard failures
    name only the first changed dimension; comparing inputs across compiles finds them all.
    Read from the locals of torch's ``_compile`` (convert_frame.py), which holds them."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "_compile" and "code" in frame.f_locals and "locals" in frame.f_locals:
            code, values = frame.f_locals["code"], frame.f_locals["locals"]
            count = code.co_argcount + code.co_kwonlyargcount
            names = code.co_varnames[:count]
            if code.co_flags & 0x04:  # *args
                names = names + (code.co_varnames[count],)
            inputs = {}
            for name in names:
                value = values.get(name) if isinstance(values, dict) else None
                if isinstance(value, tuple):
                    for i, item in enumerate(value):
                        described = _describe_value(item)
                        if described:
                            inputs[f"{name}[{i}]"] = described
                    continue
                described = _describe_value(value)
                if described:
                    inputs[name] = described
            return inputs
        frame = frame.f_back
    return {}


_MAX_STACKS = 16


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
            }
        )
        if len(stacks) >= _MAX_STACKS:
            break
    return stacks


class _Recorder:
    def __init__(self) -> None:
        self.compiles: list[dict] = []
        self.graph_breaks: list[dict] = []
        self.start_stacks: dict[str, list[dict]] = {}
        self.start_inputs: dict[str, dict] = {}
        self.start_blocks: dict[str, list[dict]] = {}
        self.seen_failures: dict[object, int] = {}
        self.frame_of_code: dict[int, dict] = {}
        self.started = time.time()
        self.torch_version = None

    # -- torch hooks -------------------------------------------------------------------
    def on_compile_start(self, *args) -> None:
        # Signature changed from () to (CallbackArgs) in 2.8: accept both.
        compile_id = str(getattr(args[0], "compile_id", "")) if args else ""
        self.start_stacks[compile_id] = user_stack(2)
        self.start_inputs[compile_id] = _compiled_frame_inputs()
        try:
            self.start_blocks[compile_id] = _compiled_frame_blocks()
        except Exception:  # never break the user's program over bookkeeping
            self.start_blocks[compile_id] = []
        self._keep_graph_break_log_enabled()

    def on_metrics(self, metrics) -> None:
        import torch._dynamo.utils as dynamo_utils

        compile_id = str(getattr(metrics, "compile_id", None))
        # Reasons appended since the last record belong to this compile (torch computes them
        # just before it compiles, or before it gives up at the recompile limit).
        new_reasons: list[str] = []
        frame = None
        for code, failures in list(dynamo_utils.guard_failures.items()):
            before = self.seen_failures.get(code, 0)
            if len(failures) > before:
                new_reasons.extend(failures[before:])
                frame = {"file": os.path.abspath(code.co_filename), "line": code.co_firstlineno, "name": code.co_name}
                self.seen_failures[code] = len(failures)
        if getattr(metrics, "co_name", None):
            frame = {
                "file": os.path.abspath(metrics.co_filename),
                "line": metrics.co_firstlineno,
                "name": metrics.co_name,
            }
        stack = self.start_stacks.pop(compile_id, None) or user_stack(3)

        def seconds(us_field: str, s_field: str):
            us = getattr(metrics, us_field, None)
            if us is not None:
                return us / 1e6
            return getattr(metrics, s_field, None)

        self.compiles.append(
            {
                "compile_id": compile_id,
                "frame": frame,
                "is_forward": getattr(metrics, "is_forward", True),
                "recompile_reason": getattr(metrics, "recompile_reason", None),
                "guard_failures": new_reasons,
                "fail_type": getattr(metrics, "fail_type", None),
                "fail_reason": getattr(metrics, "fail_reason", None),
                "restart_reasons": sorted(getattr(metrics, "restart_reasons", None) or []),
                "stack": stack,
                "inputs": self.start_inputs.pop(compile_id, None) or {},
                "blocks": self.start_blocks.pop(compile_id, None) or [],
                "seconds": {
                    "dynamo": seconds("dynamo_cumulative_compile_time_us", "entire_frame_compile_time_s"),
                    "backend": seconds("aot_autograd_cumulative_compile_time_us", "backend_compile_time_s"),
                    "inductor": seconds("inductor_cumulative_compile_time_us", "inductor_compile_time_s"),
                },
            }
        )

    def on_graph_break_log(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a log record we cannot format is not worth failing the run
            return
        graph_break = parse_graph_break(text)
        if graph_break is None:
            return
        file, line, reason = graph_break
        compile_id = None
        try:
            from torch._guards import CompileContext

            compile_id = str(CompileContext.current_compile_id())
        except Exception:
            pass
        self.graph_breaks.append(
            {
                "compile_id": compile_id,
                "file": os.path.abspath(file),
                "line": line,
                "reason": reason,
            }
        )

    def _keep_graph_break_log_enabled(self) -> None:
        # torch._logging.set_logs() (called by user code) resets artifact levels; re-assert ours.
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        if logger.level > logging.DEBUG or logger.level == logging.NOTSET:
            # Off (the user did not ask for TORCH_LOGS=graph_breaks): turn it on for our handler
            # only, so the program's stderr stays as it would be without us.
            logger.setLevel(logging.DEBUG)
            logger.propagate = False

    # -- output -------------------------------------------------------------------------
    def write(self, exit_info: dict) -> None:
        parts_dir = os.environ.get(PARTS_DIR_ENV)
        if not parts_dir:
            return
        record = {
            "pid": os.getpid(),
            "rank": _int_env("RANK"),
            "local_rank": _int_env("LOCAL_RANK"),
            "argv": list(sys.argv),
            "torch_version": self.torch_version,
            "python_version": sys.version.split()[0],
            "compiles": self.compiles,
            "graph_breaks": self.graph_breaks,
            "exit": exit_info,
            "wall_seconds": time.time() - self.started,
        }
        os.makedirs(parts_dir, exist_ok=True)
        path = os.path.join(parts_dir, f"part-{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh)
        os.replace(tmp, path)


def _int_env(name: str):
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


class _GraphBreakHandler(logging.Handler):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__(logging.DEBUG)
        self.recorder = recorder

    def emit(self, record: logging.LogRecord) -> None:
        self.recorder.on_graph_break_log(record)


class _RecordingDeque(collections.deque):
    """torch's metrics deque, with a hook on append and without the 64-record cap."""

    recorder: _Recorder | None = None

    def append(self, item) -> None:  # noqa: D401
        super().append(item)
        if self.recorder is not None:
            try:
                self.recorder.on_metrics(item)
            except Exception as exc:  # never break the user's program over bookkeeping
                print(f"recompile-fix: recorder error: {exc!r}", file=sys.stderr)


_RECORDER: _Recorder | None = None
_METRICS_CAP = 1_000_000


def install() -> _Recorder:
    """Start recording in this process. Idempotent."""
    global _RECORDER, _TORCH_DIR
    if _RECORDER is not None:
        return _RECORDER
    import torch
    import torch._dynamo
    import torch._dynamo.utils as dynamo_utils

    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
    recorder = _Recorder()
    recorder.torch_version = torch.__version__
    _RECORDER = recorder

    existing = getattr(dynamo_utils, "_compilation_metrics", None)
    if isinstance(existing, collections.deque):
        deque = _RecordingDeque(existing, maxlen=_METRICS_CAP)
        deque.recorder = recorder
        dynamo_utils._compilation_metrics = deque
    else:
        print("recompile-fix: this torch has no metrics deque; compiles will not be recorded", file=sys.stderr)

    callback = getattr(getattr(torch._dynamo, "callback", None), "on_compile_start", None)
    if callback is not None:
        callback(recorder.on_compile_start)

    logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
    logger.addHandler(_GraphBreakHandler(recorder))
    recorder._keep_graph_break_log_enabled()

    backend = os.environ.get(BACKEND_ENV)
    if backend:
        _force_backend(torch, backend)

    # `recompile-fix verify` also wants what each compiled callable returned.
    from recompile_fix.profile.compiled_outputs import install_from_env

    install_from_env(torch)

    atexit.register(_write_at_exit)
    return recorder


def _force_backend(torch, backend: str) -> None:
    original = torch.compile

    def compile_with_backend(*args, **kwargs):
        kwargs["backend"] = backend
        return original(*args, **kwargs)

    compile_with_backend.__wrapped__ = original
    torch.compile = compile_with_backend


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

        def exec_module(module):
            original_exec(module)
            install()

        loader.exec_module = exec_module
        return spec


def install_when_torch_imported() -> None:
    global _previous_excepthook
    _previous_excepthook = sys.excepthook
    sys.excepthook = _note_uncaught
    if "torch" in sys.modules:
        install()
    else:
        sys.meta_path.insert(0, _TorchImportWatcher())
