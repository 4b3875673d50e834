"""Where a compiled function is called, and how a call passes one of its parameters: the call
sites of a frame's compiles (the user line that called into compiled code, the function a resume
frame was cut from), the other calls of the same callee in those files, and the argument that
binds a parameter (by position or keyword). For the rules that edit arguments at the call
(RF002, RF009)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import libcst as cst

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import Compile, Frame, Location
from recompile_fix.profile.resume import resumed_function

__all__ = ["Parameter", "call_sites", "calls", "compiled_function", "is_number", "is_tensor_call"]


class Parameter:
    """Where calls pass a parameter of the compiled function: by position or keyword."""

    def __init__(self, name: str, index: int | None):
        self.name, self.index = name, index

    @classmethod
    def of(cls, source: SourceFile, func: cst.FunctionDef, name: str) -> "Parameter | None":
        params = func.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        if source.enclosing_class(func) is not None and not any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in func.decorators
        ):
            positional = positional[1:]  # `self` is bound by the call
        if name in positional:
            return cls(name, positional.index(name))
        if name in [p.name.value for p in params.kwonly_params]:
            return cls(name, None)
        return None

    def argument_of(self, call: cst.Call) -> tuple[cst.Arg | None, str | None]:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == self.name:
                return arg, None
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args):
            return None, "the call passes *args or **kwargs"
        if self.index is not None and self.index < len(positional):
            return positional[self.index], None
        return None, f"the call does not pass `{self.name}` (its default is used)"


def calls(
    sites: list[Location], project: Project, frame: Frame | None = None
) -> Iterator[tuple[Location, cst.Call | None, bool]]:
    """The compiled call sites, then the other calls of the same callee in those files. With the
    compiled ``frame``, a site without column spans names the call that can take its arguments."""
    seen = set()
    callees: dict[str, set[str]] = {}
    for site in sites:
        source = project.source(site.file)
        call = call_at_site(source, site, frame, project.source) if source else None
        if source is not None and call is not None:
            if id(call) in seen:
                continue
            seen.add(id(call))
            callees.setdefault(site.file, set()).add(source.code(call.func))
        yield site, call, True
    for file, names in callees.items():
        other = project.source(file)
        if other is None:
            continue
        for call in other.nodes(cst.Call):
            if id(call) not in seen and other.code(call.func) in names:
                seen.add(id(call))
                pos = other.positions[call]
                yield Location(file=file, line=pos.start.line, col=pos.start.column), call, False


def call_sites(frame: Frame, function_name: str) -> list[Location]:
    """Per compile, the user line that called the compiled function (for the code after a graph
    break: the line that called the function the break is in); lines in files outside the
    project (a library's own call) are not the user's to edit."""
    sites, seen = [], set()
    for compile_ in frame.compiles:
        site = _site(compile_, function_name)
        if site is not None and not os.path.isabs(site.file) and (site.file, site.line, site.col) not in seen:
            seen.add((site.file, site.line, site.col))
            sites.append(site)
    return sites


def _site(compile_: Compile, function_name: str) -> Location | None:
    for location in reversed(compile_.stack):
        if function_name in (location.function, resumed_function(location.function)):
            continue
        return location
    return None


def compiled_function(source: SourceFile, frame: Frame, function_name: str) -> cst.FunctionDef | None:
    if function_name == frame.name:
        return source.function_def(frame.first_line, frame.name)
    for node in source.nodes(cst.FunctionDef):  # the function a resume frame was cut from
        pos = source.positions[node]
        if node.name.value == function_name and pos.start.line <= frame.first_line <= pos.end.line:
            return node
    return None


def is_number(node: cst.BaseExpression) -> bool:
    """A literal number, or arithmetic with one (``2.5``, ``0.5 + i``, ``-1``)."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_number(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return is_number(node.left) or is_number(node.right)
    return False


def is_tensor_call(node: cst.BaseExpression, source: SourceFile | None) -> bool:
    return (
        source is not None
        and isinstance(node, cst.Call)
        and source.qualified_name(node.func) in ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor")
    )
