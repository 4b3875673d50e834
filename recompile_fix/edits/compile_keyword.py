"""``<keyword>=True`` at a ``torch.compile`` call the rule found (``dynamic=True``,
``isolate_recompiles=True``): the one edit several rules make there.

A Finding carries the call's span (``params["compile_call"]``: start line, column, end line,
column, as libcst's positions give it) and how the keyword goes in (``params["dynamic"]``):
``"decorate"`` a bare ``@torch.compile``, ``"add"`` to the call's arguments, ``"replace"`` the
value it has."""

from __future__ import annotations

from typing import Any

import libcst as cst

from recompile_fix.analysis.call_site_code import node_at_span
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit

__all__ = ["compile_call_params", "compile_keyword_edits"]


def compile_call_params(source: SourceFile, node: cst.CSTNode, keyword: str = "dynamic") -> dict[str, Any]:
    """The params that ``compile_keyword_edits`` reads, for ``node`` (a ``torch.compile`` call, or
    a bare ``@torch.compile`` decorator's expression)."""
    pos = source.positions[node]
    given = isinstance(node, cst.Call) and any(a.keyword is not None and a.keyword.value == keyword for a in node.args)
    return {
        "compile_call": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
        "keyword": keyword,
        "dynamic": "replace" if given else "add" if isinstance(node, cst.Call) else "decorate",
    }


def compile_keyword_edits(file: str, params: dict[str, Any], source: SourceFile, rule: str) -> list[Edit]:
    """``<keyword>=True`` at the compile call ``params`` names (``compile_call_params``)."""
    keyword = params.get("keyword", "dynamic")
    if params.get("dynamic") == "decorate":  # a bare `@torch.compile`
        node = node_at_span(source, cst.BaseExpression, params["compile_call"])
        end = source.span(node)[1]
        return [Edit(file, end, end, f"({keyword}=True)", rule)]
    node = node_at_span(source, cst.Call, params["compile_call"])
    given = next((a for a in node.args if a.keyword is not None and a.keyword.value == keyword), None)
    if given is not None:
        start, end = source.span(given.value)
        return [Edit(file, start, end, "True", rule)]
    last = node.args[-1] if node.args else None
    if last is None:
        at = source.span(node)[1] - 1  # before the closing parenthesis
        return [Edit(file, at, at, f"{keyword}=True", rule)]
    end = source.span(last.value)[1]
    return [Edit(file, end, end, f", {keyword}=True", rule)]
