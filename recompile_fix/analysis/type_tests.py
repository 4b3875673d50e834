"""Type tests that decide nothing a 0-d tensor would change: ``if torch.is_tensor(c): c = c.to(x.device)``.

Library code that takes a number or a tensor often tests which it got, only to move a tensor to
the device of the tensors it meets (transformers' ``fixed_cross_entropy``: "just in case users
pass an int for num_items_in_batch"). A 0-d tensor passed there takes the branch, is moved, and
then computes what the number did: both ways compute the same. Any other type test (another
body, an ``else``, a dtype) takes another path for a tensor and still blocks (``scalar_uses``).
"""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.cst_names import name_loads
from recompile_fix.analysis.cst_walk import is_name
from recompile_fix.analysis.source import SourceFile

__all__ = ["device_move_tests", "loads_past_device_moves"]


def device_move_tests(source: SourceFile, scope: cst.CSTNode, name: str) -> list[cst.If]:
    """The ``if torch.is_tensor(name): name = name.to(<a device>)`` statements (no ``else``) in
    ``scope``; ``isinstance(name, torch.Tensor)`` and an ``and name is not None`` test too."""
    found = []
    for node in source.nodes(cst.If):
        if node.orelse is not None or not _tests_tensor(source, node.test, name):
            continue
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        if len(body) == 1 and _moves_only(body[0], name) and scope in set(source.ancestors(node)):
            found.append(node)
    return found


def loads_past_device_moves(source: SourceFile, scope: cst.CSTNode, name: str) -> tuple[list[cst.Name], list[int]]:
    """The reads of ``name`` in ``scope`` outside such device moves, and the lines of the moves."""
    moves = device_move_tests(source, scope, name)
    inside = {id(n) for move in moves for n in name_loads(source, move, name)}
    inside |= {id(n) for move in moves for n in _names(move.test, name)}
    loads = [n for n in name_loads(source, scope, name) if id(n) not in inside]
    return loads, [source.positions[m].start.line for m in moves]


def _tests_tensor(source: SourceFile, test: cst.BaseExpression, name: str) -> bool:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        sides = (test.left, test.right)
        return any(_tests_tensor(source, s, name) for s in sides) and all(
            _tests_tensor(source, s, name) or _not_none(s, name) for s in sides
        )
    if not isinstance(test, cst.Call) or not test.args or not is_name(test.args[0].value, name):
        return False
    qualified = source.qualified_name(test.func)
    if qualified == "torch.is_tensor" and len(test.args) == 1:
        return True
    return (
        qualified == "isinstance"
        and len(test.args) == 2
        and source.qualified_name(test.args[1].value) in ("torch.Tensor", "torch.tensor.Tensor")
    )


def _not_none(test: cst.BaseExpression, name: str) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and is_name(test.left, name)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and is_name(test.comparisons[0].comparator, "None")
    )


def _moves_only(statement: cst.BaseStatement, name: str) -> bool:
    """``name = name.to(x.device)`` / ``name.to(device=d)`` (``non_blocking`` allowed): the value
    and dtype stay, only the device may change."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not is_name(assign.targets[0].target, name):
        return False
    call = assign.value
    if not (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "to"
        and is_name(call.func.value, name)
        and call.args
    ):
        return False
    for arg in call.args:
        if arg.star:
            return False
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "non_blocking":
            continue
        if keyword not in (None, "device"):
            return False
        value = arg.value
        if keyword is None and not (isinstance(value, cst.Attribute) and value.attr.value == "device"):
            return False
    return True


def _names(node: cst.CSTNode, name: str) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, inner: cst.Name) -> None:
            if inner.value == name:
                found.append(inner)

    node.visit(Collect())
    return found
