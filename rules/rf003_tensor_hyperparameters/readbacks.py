"""Where the program reads the lr back: ``sched.get_last_lr()``, ``opt.param_groups[0]['lr']``,
``g['lr']`` in a loop over ``opt.param_groups``. After RF003's fix each gives a 0-d tensor where
the program had a float: ``round(lr, 6)`` raises TypeError, ``print(lr)`` prints ``tensor(...)``,
``json.dumps`` refuses it (measured, torch 2.13: a program that logs ``round(lr, 6)`` crashed).
An f-string formats a 0-d tensor as its item, the float: not a read back."""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.source import SourceFile

__all__ = ["is_lr_key", "lr_readbacks", "param_group_owner"]

_SCHEDULER_READS = ("get_last_lr", "get_lr")


def lr_readbacks(source: SourceFile | None, file: str) -> list[str]:
    """``file:line (`code`)`` for each place the program reads an lr back, in source order."""
    if source is None or "lr" not in source.text:
        return []
    found: list[cst.CSTNode] = [
        call
        for call in source.nodes(cst.Call)
        if isinstance(call.func, cst.Attribute)
        and call.func.attr.value in _SCHEDULER_READS
        and not _formatted(source, call, indexed=True)
    ]
    for node in source.nodes(cst.Subscript):
        if (
            is_lr_key(node)
            and param_group_owner(source, node.value) is not None
            and not _is_write(source, node)
            and not _formatted(source, node)
        ):
            found.append(node)
    lines = sorted({source.positions[node].start.line for node in found})
    return [f"{file}:{line} (`{source.lines[line - 1].strip()}`)" for line in lines]


def param_group_owner(source: SourceFile, group: cst.BaseExpression) -> str | None:
    """``opt.param_groups[0]`` -> ``opt``; ``g`` bound by ``for g in opt.param_groups:`` -> ``opt``."""
    if isinstance(group, cst.Subscript):
        group = group.value
        if isinstance(group, cst.Attribute) and group.attr.value == "param_groups":
            return source.code(group.value)
        return None
    if not isinstance(group, cst.Name):
        return None
    node = source.parents.get(group)
    while node is not None:
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == group.value:
            it = node.iter
            if isinstance(it, cst.Attribute) and it.attr.value == "param_groups":
                return source.code(it.value)
            return None
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return None
        node = source.parents.get(node)
    return None


def is_lr_key(node: cst.Subscript) -> bool:
    return (
        len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and isinstance(node.slice[0].slice.value, cst.SimpleString)
        and node.slice[0].slice.value.evaluated_value == "lr"
    )


def _is_write(source: SourceFile, node: cst.Subscript) -> bool:
    """``g['lr'] = v``, ``g['lr'] *= v`` or ``g['lr'].fill_(v)``: the program sets it."""
    parent = source.parents.get(node)
    if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is node):
        return True
    return (
        isinstance(parent, cst.Attribute)
        and parent.attr.value in ("fill_", "copy_", "mul_", "add_")
        and isinstance(source.parents.get(parent), cst.Call)
    )


def _formatted(source: SourceFile, node: cst.CSTNode, indexed: bool = False) -> bool:
    """Is the value read straight into an f-string (``f"{lr:.2e}"``; for ``get_last_lr()``, one
    item of it, ``f"{sched.get_last_lr()[0]}"``)? A 0-d tensor formats as its ``item()`` does
    (``Tensor.__format__``), and a float64 one's item is the float: the same text."""
    parent = source.parents.get(node)
    if indexed:
        if not (isinstance(parent, cst.Subscript) and parent.value is node):
            return False
        parent = source.parents.get(parent)
    return isinstance(parent, cst.FormattedStringExpression)
