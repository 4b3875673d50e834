"""Names in a libcst tree: which ones a function reads, where a parameter is bound, and the
definitions a call may reach in the same file.
"""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.cst_walk import is_name, walk
from recompile_fix.analysis.source import SourceFile

__all__ = [
    "annotated_tensors",
    "function_named",
    "number_literal",
    "is_load",
    "name_loads",
    "one_line",
    "parameter_for",
    "submodule_class",
    "submodule_constructor",
    "target_names",
]


def name_loads(source: SourceFile, scope: cst.CSTNode, name: str) -> list[cst.Name]:
    """The places ``name`` is read inside ``scope`` (not counting nested functions that bind
    their own ``name``, or class bodies)."""
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope or name not in _param_names(node)

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return name not in {p.name.value for p in node.params.params}

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return node is scope

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name and is_load(source, node):
                found.append(node)

    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    body.visit(Collect())
    return found


def is_load(source: SourceFile, node: cst.CSTNode) -> bool:
    """Is this Name (or Attribute) read, rather than bound, deleted or only a label?"""
    parent = source.parents.get(node)
    if isinstance(parent, cst.Attribute) and node is parent.attr:
        return False
    if isinstance(parent, cst.Arg) and node is parent.keyword:
        return False
    if isinstance(
        parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.NameItem, cst.AsName, cst.Del)
    ):
        return False
    child = node
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, parent = parent, source.parents.get(parent)
    if isinstance(parent, cst.AssignTarget) and child is parent.target:
        return False
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)) and child is getattr(
        parent, "target", None
    ):
        return False
    return True


def _param_names(func: cst.FunctionDef) -> set[str]:
    p = func.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def parameter_for(func: cst.FunctionDef, arg: cst.Arg, call: cst.Call, bound: bool):
    """The callee's parameters mapped to the call's arguments, and the one ``arg`` binds."""
    p = func.params
    positional = [x.name.value for x in (*p.posonly_params, *p.params)]
    if bound and positional:
        positional = positional[1:]
    mapping: dict[str, cst.Arg | None] = {name: None for name in _param_names(func)}
    index = 0
    for a in call.args:
        if a.star:
            return mapping, None
        if a.keyword is not None:
            if a.keyword.value in mapping:
                mapping[a.keyword.value] = a
            continue
        if index < len(positional):
            mapping[positional[index]] = a
        index += 1
    param = next((name for name, a in mapping.items() if a is arg), None)
    return mapping, param


def function_named(source: SourceFile, body_owner, name: str) -> cst.FunctionDef | None:
    statements = body_owner.body if isinstance(body_owner, (cst.Module, cst.IndentedBlock)) else body_owner
    for statement in statements:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def submodule_constructor(cls: cst.ClassDef, attr: str) -> cst.BaseExpression | None:
    """``self.block = Block(...)`` (or ``models.Block(...)``) in the class -> ``Block``."""
    for node in walk(cls):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and is_name(t.value, "self") and t.attr.value == attr:
                    return node.value.func
    return None


def submodule_class(source: SourceFile, cls: cst.ClassDef, attr: str) -> cst.ClassDef | None:
    """``self.block = Block(...)`` in the class -> the ClassDef of ``Block`` in the same file."""
    for node in walk(cls):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name):
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and is_name(t.value, "self") and t.attr.value == attr:
                    for statement in source.module.body:
                        if isinstance(statement, cst.ClassDef) and statement.name.value == node.value.func.value:
                            return statement
    return None


def annotated_tensors(node: cst.CSTNode) -> set[str]:
    if not isinstance(node, cst.FunctionDef):
        return set()
    names = set()
    p = node.params
    for param in (*p.posonly_params, *p.params, *p.kwonly_params):
        annotation = param.annotation.annotation if param.annotation else None
        text = ""
        if isinstance(annotation, cst.Name):
            text = annotation.value
        elif isinstance(annotation, cst.Attribute):
            text = annotation.attr.value
        if text == "Tensor":
            names.add(param.name.value)
    return names


def target_names(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in target_names(e.value)]
    if isinstance(target, cst.StarredElement):  # `for first, *rest in ...`
        return target_names(target.value)
    return []


def number_literal(node: cst.BaseExpression) -> int | float | None:
    """The value of a numeric literal (``1e-5``, ``-1``), else None."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        inner = number_literal(node.expression)
        return None if inner is None else (-inner if isinstance(node.operator, cst.Minus) else inner)
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.Float):
        return float(node.evaluated_value)
    return None


def one_line(code: str) -> str:
    first = code.strip().splitlines()[0] if code.strip() else ""
    return first if len(first) <= 60 else first[:57] + "..."
