"""Where the user compiles a frame, and with which options: ``@torch.compile(dynamic=False)`` on
the function, ``torch.compile(fn, dynamic=False)`` or ``torch.compile(model, dynamic=False)`` /
``model.compile(dynamic=False)`` in the files the Profile saw."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from recompile_fix.analysis.call_site_code import find_compile_call, root_name, runs_cuda_graphs
from recompile_fix.analysis.cst_walk import dotted_name
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import Frame, Profile

__all__ = [
    "CompileCall",
    "compile_call_of",
    "compile_keyword",
    "generates_no_kernels",
    "says_dynamic_false",
    "sets_config",
    "static_compile_site",
]


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


@dataclass(frozen=True)
class CompileCall:
    """The ``torch.compile`` call (or bare ``@torch.compile``) that compiles a frame, and what it
    says: where ``dynamic=True`` would go."""

    source: SourceFile
    file: str
    node: cst.CSTNode
    whole: bool  # it compiles more than the frame's own function (a model, a caller)
    static: bool  # it says dynamic=False
    dynamic: bool  # it says dynamic=True already
    cuda_graphs: bool  # mode="reduce-overhead" and kin: a graph recorded per value and size
    # backend="eager" or "aot_eager": the graph's ops run as they are, no kernel is generated for
    # a size (so a dynamic size costs no specialised kernel)
    no_kernels: bool = False

    @property
    def compiled(self) -> str | None:
        """What ``torch.compile(X)`` compiles, as the code spells it (``unet``); None for a
        decorator (the function's own name says it)."""
        node = self.node
        if isinstance(node, cst.Call) and node.args and node.args[0].keyword is None:
            return self.source.code(node.args[0].value)
        return None


def compile_call_of(project: Project, frame: Frame, function_name: str) -> CompileCall | None:
    """The compile call of ``frame``: ``function_name``'s decorator or ``torch.compile(<it>)`` in
    the frame's file, else the compile call of what the user line nearest the frame on its
    compiles' stacks calls (``cmodel = torch.compile(model)`` for ``cmodel(x)``)."""
    file = frame.file
    found = find_compile_call(project, file, {function_name}, dynamic_true=True)
    if found is None:
        site = next(
            (loc for c in frame.compiles for loc in reversed(c.stack) if not os.path.isabs(loc.file)),
            None,
        )
        source = project.source(site.file) if site is not None else None
        if site is None or source is None:
            return None
        called = {root_name(c.func) for c in source.nodes(cst.Call) if source.positions[c].start.line == site.line}
        file = site.file
        found = find_compile_call(project, file, {n for n in called if n}, dynamic_true=True)
        if found is None:
            return None
    source, node, _ = found
    return CompileCall(
        source=source,
        file=file,
        node=node,
        whole=not _compiles_the_function(source, node, function_name),
        static=says_dynamic_false(node),
        dynamic=_says(node, "dynamic", "True"),
        cuda_graphs=runs_cuda_graphs(source, node),
        no_kernels=generates_no_kernels(node),
    )


def generates_no_kernels(node: cst.CSTNode) -> bool:
    """Does this compile call say ``backend="eager"`` or ``"aot_eager"`` (no kernel per size)?"""
    return _says_backend(node, ("eager", "aot_eager"))


def says_dynamic_false(node: cst.CSTNode) -> bool:
    """Does this compile call say ``dynamic=False`` (a graph per size, chosen)?"""
    return _says(node, "dynamic", "False")


def _says(node: cst.CSTNode, keyword: str, value: str) -> bool:
    return isinstance(node, cst.Call) and any(
        a.keyword is not None
        and a.keyword.value == keyword
        and isinstance(a.value, cst.Name)
        and a.value.value == value
        for a in node.args
    )


def _says_backend(node: cst.CSTNode, backends: tuple[str, ...]) -> bool:
    return isinstance(node, cst.Call) and any(
        a.keyword is not None
        and a.keyword.value == "backend"
        and isinstance(a.value, cst.SimpleString)
        and a.value.evaluated_value in backends
        for a in node.args
    )


def _compiles_the_function(source: SourceFile, node: cst.CSTNode, function_name: str) -> bool:
    """Is ``node`` the function's own decorator, or ``torch.compile(<function_name>, ...)``?"""
    if isinstance(source.parents.get(node), cst.Decorator):
        return True
    if isinstance(node, cst.Call) and node.args and node.args[0].keyword is None:
        first = node.args[0].value
        return isinstance(first, cst.Name) and first.value == function_name
    return False


def sets_config(source: SourceFile, names: set[str]) -> bool:
    """Does the file's code assign (``=``, ``+=``) a config attribute of ``names``
    (``torch.compiler.config.dynamic_sources``), not only mention one (a docstring, a comment)?"""
    if not any(name in source.text for name in names):
        return False
    for node in ast.walk(source.syntax):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        if any(isinstance(t, ast.Attribute) and t.attr in names for t in targets):
            return True
    return False
