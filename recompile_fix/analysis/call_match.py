"""Which call expression a Profile's call site names (``call_sites.calls`` and RF001 ask).

CPython reports the column span of the calling expression, and ``SourceFile.call_at`` finds the
call with exactly that span. A Profile without spans (recorded with ``PYTHONNODEBUGRANGES=1``,
``-X no_debug_ranges``, or a trace that lacks them) names only the line, and a line often holds
several calls: ``print("sum", f(x, 0.5).sum().item())``. Then the call is the one whose
arguments can be what the compiled frame received there (the recorded tensors and Python
numbers, the parameters it has); when no call, or more than one, can be, there is none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst

from recompile_fix.analysis.cst_walk import is_name
from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import Frame, Location

__all__ = ["call_at_site", "could_receive"]


def call_at_site(
    source: SourceFile, site: Location, frame: Frame | None, read: Callable[[str], Any]
) -> cst.Call | None:
    """The call expression at ``site`` that called into ``frame`` (``read``: path -> SourceFile
    or None, for the frame's own source)."""
    accept = None
    if frame is not None:
        func = None
        frame_source = read(frame.file)
        if frame_source is not None:
            func = frame_source.function_def(frame.first_line, frame.name)
        accept = _Signature(frame, func, frame_source, site).accepts
    return source.call_at(site.line, site.col, site.end_line, site.end_col, accept=accept)


def could_receive(call: cst.Call, frame: Frame, func: cst.FunctionDef | None, func_source: SourceFile | None) -> bool:
    """Could ``call`` have passed the arguments ``frame`` recorded (at any of its compiles)?"""
    return _Signature(frame, func, func_source, None).accepts(call)


_NOT_A_LITERAL = object()


class _Signature:
    """The compiled function's parameters and what it received at one call site."""

    def __init__(
        self, frame: Frame, func: cst.FunctionDef | None, func_source: SourceFile | None, site: Location | None
    ):
        self.func = func
        self.recorded: dict[str, list[dict[str, Any]]] = {}
        for compile_ in frame.compiles:
            here = compile_.call_site
            if site is not None and (here is None or (here.file, here.line) != (site.file, site.line)):
                continue
            for name, entry in compile_.inputs.items():
                if isinstance(entry, dict):
                    self.recorded.setdefault(name, []).append(entry)
        self.positional: list[str] = []
        self.keyword_only: list[str] = []
        self.required: set[str] = set()
        self.star_args = self.star_kwargs = True  # unknown signature: anything goes
        if func is not None:
            params = func.params
            positional = [*params.posonly_params, *params.params]
            if func_source is not None and func_source.enclosing_class(func) is not None and not _is_static(func):
                positional = positional[1:]  # `self` (or `cls`) is bound by the call
            self.positional = [p.name.value for p in positional]
            self.keyword_only = [p.name.value for p in params.kwonly_params]
            self.required = {p.name.value for p in (*positional, *params.kwonly_params) if p.default is None}
            self.star_args = isinstance(params.star_arg, cst.Param)
            self.star_kwargs = params.star_kwarg is not None

    def accepts(self, call: cst.Call) -> bool:
        starred = any(a.star for a in call.args)
        passed: dict[str, cst.BaseExpression] = {}
        index = 0
        for arg in call.args:
            if arg.star:
                continue
            if arg.keyword is not None:
                name = arg.keyword.value
                if self.func is not None and name not in self.positional + self.keyword_only and not self.star_kwargs:
                    return False
                passed[name] = arg.value
                continue
            if index < len(self.positional):
                passed[self.positional[index]] = arg.value
            elif self.func is not None and not self.star_args:
                return False  # more positional arguments than the function takes
            else:
                passed[f"args[{index - len(self.positional)}]"] = arg.value
            index += 1
        if self.func is None:
            for i, arg in enumerate(a for a in call.args if not a.star and a.keyword is None):
                passed.setdefault(f"args[{i}]", arg.value)
        elif not starred and not self.required <= set(passed):
            return False  # a parameter without a default is not passed
        return all(self._could_be(name, value) for name, value in passed.items())

    def _could_be(self, name: str, value: cst.BaseExpression) -> bool:
        entries = self.recorded.get(name)
        if not entries:
            return True
        literal = _literal(value)
        if literal is _NOT_A_LITERAL:
            return True  # a name or a computed value: it can be anything
        for entry in entries:
            kind = entry.get("type")
            if kind == "Tensor":
                continue  # a literal is never a tensor
            if kind == "None" and literal is None:
                return True
            if kind in ("int", "float", "bool") and isinstance(literal, (int, float)) and not isinstance(literal, str):
                if literal == entry.get("value"):
                    return True
        return False


def _literal(node: cst.BaseExpression) -> Any:
    """The value of a literal argument (numbers, strings, True/False/None, containers as a
    marker), else _NOT_A_LITERAL."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _literal(node.expression)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else _NOT_A_LITERAL
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.evaluated_value
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "<str>"
    if isinstance(node, (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.Lambda)):
        return "<container>"
    for constant in ("True", "False", "None"):
        if is_name(node, constant):
            return {"True": True, "False": False, "None": None}[constant]
    return _NOT_A_LITERAL


def _is_static(func: cst.FunctionDef) -> bool:
    return any(is_name(d.decorator, "staticmethod") for d in func.decorators)
