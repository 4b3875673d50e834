"""Starting the recorder in the user's process, and writing its record however the process ends.

``install_when_torch_imported`` (called by ``_bootstrap/sitecustomize.py`` and the warm runner's
child) waits until the program imports torch, then ``install`` hooks torch's bookkeeping
(``hooks``), notes the program's facts (``program_facts``) and arranges that the record is
written at exit, on SIGTERM, and with the exception that ended the program, if one did.
"""

from __future__ import annotations

import atexit
import collections
import importlib.abc
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from typing import Any

from recompile_fix.profile.recorder.hooks import RecordingDeque, wrap_reset
from recompile_fix.profile.recorder.internals import (
    assigned_compile_ids,
    has_compile_context,
    import_optional,
    metrics_contexts,
)
from recompile_fix.profile.recorder.program_facts import first_run_compiles, note_backward, time_compiled_modules
from recompile_fix.profile.recorder.recording import Recorder
from recompile_fix.profile.recorder.stack import note_torch_dir
from recompile_fix.profile.run_seed import note_untouched_generators, seed_generators  # standard library only

__all__ = ["BACKEND_ENV", "install", "install_when_torch_imported"]

BACKEND_ENV = "RECOMPILE_FIX_BACKEND"

_RECORDER: Recorder | None = None
_EXIT_INFO: dict = {"status": "exited"}
_previous_excepthook = sys.excepthook


def install(numpy_before_torch: bool = False) -> Recorder:
    """Start recording in this process. Idempotent. ``numpy_before_torch``: the program imported
    numpy before torch (it may have seeded it: left alone)."""
    global _RECORDER
    if _RECORDER is not None:
        return _RECORDER
    import torch
    import torch._dynamo

    note_torch_dir(os.path.dirname(os.path.abspath(torch.__file__)))
    try:
        seed_generators(torch, numpy_before_torch)
    except Exception as exc:  # never break the user's program over it
        print(f"recompile-fix: random generators not seeded: {exc!r}", file=sys.stderr)
    recorder = Recorder()
    recorder.torch_version = getattr(torch, "__version__", None)
    _RECORDER = recorder
    _hook_torch(torch, recorder)

    backend = os.environ.get(BACKEND_ENV)
    if backend:
        _force_backend(torch, backend)
    note_backward(torch, recorder)
    first_run_compiles(torch, recorder)
    time_compiled_modules(recorder)

    # `recompile-fix verify` also wants what each compiled callable returned.
    from recompile_fix.profile.compiled_outputs import install_from_env

    install_from_env(torch)

    atexit.register(_write_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=recorder.after_fork_in_child)
    _write_on_sigterm()
    return recorder


def _hook_torch(torch: Any, recorder: Recorder) -> None:
    """Hook the metrics deque, ``torch._dynamo.reset()`` and (``ensure_hooks``) the rest, noting
    in ``features`` which of torch's internals this release has."""
    dynamo_utils: Any = import_optional("torch._dynamo.utils")
    import_optional("torch._dynamo.convert_frame")  # FRAME_COMPILE_COUNTER: the exit cross-check
    callback_module = import_optional("torch._dynamo.callback")

    existing = getattr(dynamo_utils, "_compilation_metrics", None)
    if isinstance(existing, collections.deque) and type(existing) is collections.deque:
        deque = RecordingDeque(existing, maxlen=existing.maxlen)
        deque.recorder = recorder
        dynamo_utils._compilation_metrics = deque
    recorder.features.update(
        {
            "metrics_context": bool(metrics_contexts(dynamo_utils))
            or callable(getattr(dynamo_utils, "record_compilation_metrics", None)),
            "metrics_deque": isinstance(existing, collections.deque),
            "compile_start_callback": callable(getattr(callback_module, "on_compile_start", None)),
            "guard_failures": isinstance(getattr(dynamo_utils, "guard_failures", None), dict),
            "frame_compile_counter": assigned_compile_ids() is not None,
            "compile_context": has_compile_context(),
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
        torch._dynamo.reset = wrap_reset(reset, recorder)
    recorder.ensure_hooks()


def _force_backend(torch: Any, backend: str) -> None:
    original = torch.compile

    def compile_with_backend(*args, **kwargs):
        kwargs["backend"] = backend
        return original(*args, **kwargs)

    compile_with_backend.__wrapped__ = original  # type: ignore[attr-defined]
    torch.compile = compile_with_backend


# -- however the process ends ---------------------------------------------------------------
def _write_at_exit() -> None:
    if _RECORDER is not None:
        _RECORDER.write(_EXIT_INFO)
    # The interpreter's shutdown then collects garbage over every object torch and Dynamo made
    # (about 0.8 s of a small compiled program's run, more for a big model): frozen, they are
    # freed by their reference counts as module teardown clears them, files flushed and `__del__`
    # run as before; only cycles are not collected, which CPython never promises at exit.
    import gc

    gc.freeze()


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


def _note_uncaught(exc_type: type[BaseException], exc: BaseException, tb: types.TracebackType | None) -> None:
    _EXIT_INFO.update({"status": "raised", "exception": f"{exc_type.__name__}: {exc}"[:500]})
    _previous_excepthook(exc_type, exc, tb)


# -- waiting for `import torch` --------------------------------------------------------------
class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Installs the recorder right after the program's own ``import torch`` finishes."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec: Callable[[types.ModuleType], None] = loader.exec_module
        numpy_before_torch = "numpy" in sys.modules

        def exec_module(module: types.ModuleType) -> None:
            original_exec(module)
            install(numpy_before_torch)

        loader.exec_module = exec_module  # type: ignore[method-assign]
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
