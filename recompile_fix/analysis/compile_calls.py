"""Where the user compiles a frame, and with which options: ``@torch.compile(dynamic=False)`` on
the function, ``torch.compile(fn, dynamic=False)`` or ``torch.compile(model, dynamic=False)`` /
``model.compile(dynamic=False)`` in the files the Profile saw."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile, dotted_name
from recompile_fix.profile.model import Frame, Profile

__all__ = ["compile_keyword", "static_compile_site"]


def compile_keyword(source: SourceFile, func: cst.FunctionDef | None, keyword: str) -> tuple[int, str] | None:
    """(line, value) of ``keyword=`` in a compile call of ``func``: its decorator, or a
    ``torch.compile(func, ...)`` in the file. With ``func`` None (a module's forward, compiled
    through its instance): any compile call in the file."""
    candidates: list[cst.Call] = []
    if func is not None:
        candidates += [d.decorator for d in func.decorators if isinstance(d.decorator, cst.Call)]
    for call in source.nodes(cst.Call):
        first = call.args[0].value if call.args else None
        if func is None or (isinstance(first, cst.Name) and first.value == func.name.value):
            candidates.append(call)
    for call in candidates:
        name = dotted_name(call.func)
        if not (name == "compile" or name.endswith(".compile")):
            continue
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return source.positions[call].start.line, source.code(arg.value)
    return None


def static_compile_site(profile: Profile, project: Project) -> Callable[[Frame], str | None]:
    """For ``findings.accounting``: where a frame is compiled with ``dynamic=False``
    ("`dynamic=False` at train.py:12"), or None."""

    def where(frame: Frame) -> str | None:
        source = project.source(frame.file)
        func = source.function_def(frame.first_line, frame.name) if source is not None else None
        files = [(frame.file, source, func)]
        if func is not None and source is not None and source.enclosing_class(func) is not None:
            # A method (an nn.Module's forward) is compiled through its instance, where the
            # program builds it: the files on the compile's stack.
            files = [(frame.file, source, None)]
            for compile_ in frame.compiles:
                for location in compile_.stack:
                    other = project.source(location.file)
                    if other is not None and all(location.file != f for f, _, _ in files):
                        files.append((location.file, other, None))
        for file, found, function in files:
            if found is None:
                continue
            hit = compile_keyword(found, function, "dynamic")
            if hit is not None and hit[1] == "False":
                return f"`dynamic=False` at {file}:{hit[0]}"
        return None

    return where
