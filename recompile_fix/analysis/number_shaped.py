"""Whether an expression is number-shaped: a literal, arithmetic on such, a name bound only to
such in its function or module, a loop variable over a literal list of numbers. RF014 and RF015 ask it of
each value assigned to a float attribute or global, to tell a float from what may be a tensor."""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.cst_walk import is_name
from recompile_fix.analysis.source import SourceFile

__all__ = ["number_shaped"]

_NUMBER_CALLS = {"min", "max", "abs", "float", "round", "sum"}


def number_shaped(value: cst.BaseExpression, source: SourceFile, at: cst.CSTNode, depth: int = 0) -> bool:
    """Is ``value`` surely a Python number: literals, arithmetic, ``min``/``max``/``float`` of
    numbers, ``math.*``, and names bound (in the enclosing function or module) only to such, or
    as loop variables over ``range()``?"""
    if depth > 12:  # a name bound to itself, or code too deep to follow
        return False
    if isinstance(value, (cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.UnaryOperation):
        return number_shaped(value.expression, source, at, depth + 1)
    if isinstance(value, cst.BinaryOperation):
        return number_shaped(value.left, source, at, depth + 1) and number_shaped(value.right, source, at, depth + 1)
    if isinstance(value, cst.IfExp):
        return number_shaped(value.body, source, at, depth + 1) and number_shaped(value.orelse, source, at, depth + 1)
    if isinstance(value, cst.Call):
        func = source.qualified_name(value.func)
        if func in ("float", "int"):
            return True  # a number, or it raises as the float did
        if func in _NUMBER_CALLS or func.startswith("math."):
            return all(number_shaped(a.value, source, at, depth + 1) for a in value.args)
        return False
    if isinstance(value, cst.Name):
        return _name_is_number(value.value, source, at, depth)
    return False


def _name_is_number(name: str, source: SourceFile, at: cst.CSTNode, depth: int) -> bool:
    scope = next((a for a in source.ancestors(at) if isinstance(a, cst.FunctionDef)), source.module)
    bound = False
    for node in source.nodes(cst.Assign):
        if scope not in set(source.ancestors(node)) and scope is not source.module:
            continue
        for target in node.targets:
            if is_name(target.target, name):
                bound = True
                if not number_shaped(node.value, source, node, depth + 1):
                    return False
            elif isinstance(target.target, cst.Tuple):  # `steps, batch = 6, 8`
                names = [is_name(e.value, name) for e in target.target.elements]
                if any(names):
                    bound = True
                    values = node.value.elements if isinstance(node.value, cst.Tuple) else ()
                    if len(values) != len(names) or not number_shaped(
                        values[names.index(True)].value, source, node, depth + 1
                    ):
                        return False
    for loop in source.nodes(cst.For):
        if not (scope is source.module or scope in set(source.ancestors(loop))):
            continue
        over: cst.BaseExpression | None = loop.iter
        if is_name(loop.target, name):
            pass
        elif (  # `for epoch, v in enumerate(schedule):`
            isinstance(loop.target, cst.Tuple)
            and len(loop.target.elements) == 2
            and isinstance(over, cst.Call)
            and source.qualified_name(over.func) == "enumerate"
            and over.args
        ):
            index, item = (e.value for e in loop.target.elements)
            if is_name(index, name):
                over = None  # the count: an int
            elif is_name(item, name):
                over = over.args[0].value
            else:
                continue
        else:
            continue
        bound = True
        if over is not None and not _numbers_in(over, source, loop, depth + 1):
            return False
    return bound


def _numbers_in(over: cst.BaseExpression, source: SourceFile, at: cst.CSTNode, depth: int) -> bool:
    """Does iterating ``over`` give Python numbers: ``range()``, a list or tuple of numbers, or a
    name bound in scope only to such (`schedule = [0.0, 1.0, 2.0]`)?"""
    if isinstance(over, (cst.List, cst.Tuple)):  # `for v in (0.1, 0.2):`
        return all(number_shaped(e.value, source, at, depth + 1) for e in over.elements)
    if isinstance(over, cst.Call):
        return source.qualified_name(over.func) == "range"
    if not isinstance(over, cst.Name) or depth > 12:
        return False
    scope = next((a for a in source.ancestors(at) if isinstance(a, cst.FunctionDef)), source.module)
    bindings = [
        node.value
        for node in source.nodes(cst.Assign)
        if (scope is source.module or scope in set(source.ancestors(node)))
        and any(is_name(t.target, over.value) for t in node.targets)
    ]
    return bool(bindings) and all(
        isinstance(v, (cst.List, cst.Tuple)) and _numbers_in(v, source, at, depth + 1) for v in bindings
    )
