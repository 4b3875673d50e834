"""Heavy libraries a command may not need, imported when first used instead of when the module
naming them is imported: a warm `apply --check` or `report` answers from the caches and never
parses, so it should not pay libcst's import (about 130 ms, most of a small project's wall time).

``defer("libcst")`` puts a stand-in module in ``sys.modules``: ``import libcst as cst`` then
costs a lookup, and the first attribute the stand-in lacks (``cst.Call``, or ``__path__`` for a
submodule import) runs the real import and hands its names over. (``importlib.util.LazyLoader``
does not do here: on Python 3.11 the import statement itself reads ``__spec__``, which loads it.)
The command line and the language server (``recompile-fix lsp``: a file with nothing to fix is
diagnosed without libcst) call it, before the pipeline is imported, and only while the process
has one thread; library users and test runners import libcst as usual. Once threads run, the
stand-in's lock makes the first thread to read a name do the one real import."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["HEAVY", "defer", "defer_heavy", "is_loaded"]

HEAVY = ("libcst",)  # black is already imported inside the functions that format


class _Deferred(types.ModuleType):
    """Stands in for a module until one of its names is read."""

    _lock = threading.Lock()

    def __getattr__(self, attr: str) -> Any:
        with _Deferred._lock:
            name = self.__name__
            if sys.modules.get(name) is self:
                del sys.modules[name]  # the real import must not find the stand-in
                try:
                    real = importlib.import_module(name)
                except BaseException:
                    sys.modules.setdefault(name, self)
                    raise
                self.__dict__.update(real.__dict__)
                self.__dict__["_deferred_loaded"] = True
            real = sys.modules[name]
        return getattr(real, attr)


def defer(name: str) -> None:
    """Make ``import name`` lazy for this process (nothing when it is imported already or absent)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return  # not installed: the import fails where it is used, as it would have
    stand_in = _Deferred(name)
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in


def defer_heavy() -> None:
    if threading.active_count() > 1:
        return  # a test runner or a server: import as usual
    for name in HEAVY:
        defer(name)


def is_loaded(name: str) -> bool:
    """Has ``name`` really been imported (not just deferred)?"""
    module = sys.modules.get(name)
    return module is not None and not isinstance(module, _Deferred)
