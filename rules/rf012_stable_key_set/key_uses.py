"""How RF012's compiled function reads the dict whose keys come and go: only by ``.get(key)``,
where an absent key and one that is None read the same, or some other way."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from recompile_fix.analysis.source import SourceFile

__all__ = ["key_of", "read_only_by_get"]

_KEY = re.compile(r"""^(?P<param>\w+)\[(?P<q>['"])(?P<key>[^'"]+)(?P=q)\]$""")


def key_of(source: str) -> tuple[str, str] | None:
    """``kwargs['padding']`` -> ("kwargs", "padding"); None for any other source."""
    match = _KEY.match(source)
    return (match.group("param"), match.group("key")) if match else None


def read_only_by_get(source: SourceFile, func: cst.FunctionDef, param: str, keys: set[str]) -> str | None:
    """None where ``func`` reads ``param`` only as ``param.get("k")``, ``param.get("k", None)`` or
    ``param["k"]``, with no other default for one of ``keys``; else the first other use, in a few
    words (``the dict is passed on``)."""
    for node in source.nodes(cst.Name):
        if node.value != param or not _inside(source, node, func.body):
            continue
        parent = source.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = source.parents.get(parent)
            if parent.attr.value != "get" or not isinstance(call, cst.Call):
                return f"it calls `{param}.{parent.attr.value}`"
            key = _string(call.args[0].value) if call.args else None
            if key is None:
                return f"it reads `{param}.get` with a key that is no string literal"
            default = call.args[1].value if len(call.args) > 1 else None
            if key in keys and default is not None and not (isinstance(default, cst.Name) and default.value == "None"):
                return f"it reads `{param}.get({key!r}, ...)` with a default other than None"
            continue
        if isinstance(parent, cst.Subscript) and parent.value is node:
            continue
        if isinstance(parent, cst.Param):
            continue
        return f"it uses `{param}` whole (passed on, tested with `in`, measured or iterated)"
    return None


def _inside(source: SourceFile, node: cst.CSTNode, body: cst.CSTNode) -> bool:
    return any(a is body for a in source.ancestors(node))


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None
