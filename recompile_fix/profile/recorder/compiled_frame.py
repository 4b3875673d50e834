"""What torch's ``_compile`` frame (convert_frame.py) says about the code it is compiling, besides
its arguments (``inputs``): the stacks of identical blocks in the module being compiled, which
RF004 and RF007 read, and the backend it is compiled with."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from recompile_fix.profile.graph_facts import spellable_module_path  # standard library only

__all__ = ["compiled_frame_backend", "compiled_frame_blocks"]

_MAX_STACKS = 16


def _forward_arguments(kind: Any) -> int:
    """The arguments of a block class's ``forward`` past ``self`` (``*args`` / ``**kwargs`` one
    each), through decorators that keep ``__wrapped__`` (transformers' ``deprecate_kwarg``)."""
    import inspect

    try:
        forward = inspect.unwrap(kind.forward)
    except (AttributeError, ValueError):  # no forward, or a cycle of __wrapped__
        return 1
    code = getattr(forward, "__code__", None)
    if code is None:
        return 1
    varargs = bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return max(code.co_argcount + code.co_kwonlyargcount - 1, 0) + varargs


def _compiled_module(frame: types.FrameType | None) -> tuple[str, object] | None:
    """The argument naming the module whose code is being compiled, and the module: the first
    argument (``self`` of a forward), or the first of a decorator's ``(*args, **kwargs)``."""
    while frame is not None and not (frame.f_code.co_name == "_compile" and "locals" in frame.f_locals):
        frame = frame.f_back
    if frame is None or "code" not in frame.f_locals:
        return None
    code, values = frame.f_locals["code"], frame.f_locals["locals"]
    if not isinstance(values, dict):
        return None
    if code.co_argcount:
        argument = code.co_varnames[0]
        root = values.get(argument)
    elif code.co_flags & 0x04:  # (*args, **kwargs): a decorator's wrapper around a forward
        argument = code.co_varnames[code.co_kwonlyargcount]
        given = values.get(argument)
        root = given[0] if isinstance(given, tuple) and given else None
        argument = "self" if root is not None and getattr(root, "forward", None) is not None else argument
    else:
        return None
    return argument, root


def compiled_frame_blocks() -> list[dict]:
    """Stacks of identical blocks in the module whose code is being compiled: the frame's first
    argument (``self`` of a forward) when it is an ``nn.Module``. Every ModuleList / Sequential in
    it of children of one class that is not torch's own, by attribute path. RF004 and RF007 read
    them: they find blocks wherever the model keeps them (a ModuleDict, a parent class's
    ``__init__`` in another file, a pip package's model) without reading its source; a stack of
    one block (``n_layer=1`` in this run's config) tells them there is nothing to share."""
    found = _compiled_module(sys._getframe(2))
    if found is None:
        return []
    import torch

    argument, root = found
    if not isinstance(root, torch.nn.Module):
        return []
    stacks = []
    for path, module in root.named_modules():
        if not path or not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        if not spellable_module_path(root, path, torch):
            continue  # under a ModuleDict's key no rule could write (``"layer-1"``, ``"0"``)
        stack = _block_stack(path, module, argument, type(root).__qualname__, torch)
        if stack is not None:
            stacks.append(stack)
        if len(stacks) >= _MAX_STACKS:
            break
    return stacks


def _block_stack(path: str, module: Any, argument: str, owner: str, torch: types.ModuleType) -> dict | None:
    """The ModuleList / Sequential at ``path`` as a block stack when its children are of one
    class that is not torch's own and whose source is found; else None."""
    import inspect

    children = list(module.children())
    kinds = {type(child) for child in children}
    if not children or len(kinds) != 1:
        return None
    (kind,) = kinds
    if kind.__module__.split(".")[0] == "torch":
        return None  # torch's own layers: not a block anyone would decorate or compile alone
    try:
        file = os.path.abspath(inspect.getsourcefile(kind) or "")
        line = inspect.getsourcelines(kind)[1]
    except (OSError, TypeError):
        return None
    return {
        "path": path,
        "count": len(children),
        "block": kind.__qualname__,
        "file": file,
        "line": line,
        "container": "Sequential" if isinstance(module, torch.nn.Sequential) else "ModuleList",
        "argument": argument,
        "owner": owner,
        # What one block compiled on its own takes and checks at every call (RF004 / RF007's
        # choice weighs it): its parameters and buffers, and its forward's arguments.
        "graph_inputs": sum(1 for _ in children[0].parameters())
        + sum(1 for _ in children[0].buffers())
        + _forward_arguments(kind),
    }


def compiled_frame_backend() -> str | None:
    """The backend torch compiles the frame with, from the ``compiler_fn`` of torch's ``_compile``
    (convert_frame.py) unwrapped to the innermost backend (``_torchdynamo_orig_backend``): the one
    actually used, however the program chose it (``backend=args.backend``, a variable, a config).
    Its ``compiler_name`` (``"eager"``, ``"inductor"``, a callable's ``__name__``), else the
    callable's own name. None where torch's frame does not hold it."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_name == "_compile" and "compiler_fn" in frame.f_locals):
        frame = frame.f_back
    if frame is None:
        return None
    backend = frame.f_locals["compiler_fn"]
    for _ in range(16):  # the wrapper chain torch's innermost_backend() walks, bounded
        inner = getattr(backend, "_torchdynamo_orig_backend", None)
        if inner is None:
            # DDP's graph splitter compiles each piece with the backend it wraps
            # (``DDPOptimizer.compile_fn`` -> ``backend_compile_fn``).
            inner = getattr(getattr(backend, "__self__", None), "backend_compile_fn", None)
        if inner is None or not callable(inner):
            break
        backend = inner
    for name in (getattr(backend, "compiler_name", None), getattr(backend, "__name__", None)):
        if isinstance(name, str) and name:
            return name[:200]
    func = getattr(backend, "func", None)  # a functools.partial around a backend
    name = getattr(func, "__name__", None)
    return name[:200] if isinstance(name, str) and name else type(backend).__name__[:200]
