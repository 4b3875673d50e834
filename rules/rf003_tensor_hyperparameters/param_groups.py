"""Which param groups a tensor lr given to the optimizer's constructor reaches.

torch copies the constructor's ``lr`` into every param group that sets none (``setdefault``: the
same tensor object, measured on torch 2.13), and a group that sets its own keeps it. So a tensor
default is right for one group (``model.parameters()``), shared by two groups that set no ``lr``
(a scheduler's or the program's per-group value then writes into all of them: a new user's
trial, layer-wise lr decay, trained every group at the last group's lr), and unused by groups
that set their own (nothing fixed). Where the groups are built out of sight (a helper's list)
neither can be ruled out.
"""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.source import SourceFile, walk

__all__ = ["shared_default_problem"]


def shared_default_problem(source: SourceFile, params: cst.BaseExpression | None, wraps_default: bool) -> str | None:
    """Why a tensor default lr is wrong for the optimizer's ``params`` argument, or None."""
    if params is None or not wraps_default:
        return None
    seen = _resolved(source, params)
    if isinstance(seen, (cst.List, cst.Tuple)) and any(isinstance(e.value, cst.Dict) for e in seen.elements):
        without = [e for e in seen.elements if isinstance(e.value, cst.Dict) and not _sets_lr(e.value)]
        if len(without) >= 2:
            return (
                f"{len(without)} param groups set no `lr`: a tensor lr given to the constructor is one "
                "tensor shared by all of them, so a value written into one group's lr is every group's"
            )
        return None
    if _is_parameters(seen):
        return None
    return (
        f"the param groups (`{source.code(params)}`) are built where the fix cannot see whether they set "
        "their own `lr`: a tensor lr given to the constructor would be shared by those that do not, "
        "and unused by those that do"
    )


def _resolved(source: SourceFile, node: cst.BaseExpression) -> cst.BaseExpression:
    """``node``, or the value of the one assignment of the name it is in the file."""
    if not isinstance(node, cst.Name):
        return node
    values = [
        assign.value
        for assign in source.nodes(cst.Assign)
        if any(isinstance(t.target, cst.Name) and t.target.value == node.value for t in assign.targets)
    ]
    return values[0] if len(values) == 1 else node


def _sets_lr(group: cst.Dict) -> bool:
    return any(
        isinstance(item, cst.DictElement)
        and isinstance(item.key, cst.SimpleString)
        and item.key.evaluated_value == "lr"
        or isinstance(item, cst.StarredDictElement)
        for item in group.elements
    )


def _is_parameters(node: cst.BaseExpression) -> bool:
    """A plain iterable of parameters: ``model.parameters()``, ``list(model.parameters())``, a
    comprehension or ``filter`` over them, with no dict (no param group) in it."""
    calls = [n for n in walk(node) if isinstance(n, cst.Call)]
    parameters = any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value in ("parameters", "named_parameters") for c in calls
    )
    return parameters and not any(isinstance(n, cst.Dict) for n in walk(node))
