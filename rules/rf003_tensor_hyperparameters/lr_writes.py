"""The program's own writes of a Python float into an optimizer's lr (`group['lr'] = value`):
what a tensor lr would have replaced, unless written as `fill_`."""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.source import SourceFile
from recompile_fix.rules.rf003_tensor_hyperparameters.readbacks import is_lr_key, param_group_owner

__all__ = ["LrAssignment", "is_tensor_call", "lr_assignments"]


class LrAssignment:
    """``group['lr'] = value``: the program writes the lr itself. ``owner`` is the optimizer's
    name when the target is ``opt.param_groups[i]['lr']`` or a loop over ``opt.param_groups``."""

    def __init__(self, where: str, text: str, span: tuple[int, int], target: str, value: str, owner: str | None):
        self.where, self.text, self.span, self.target, self.value, self.owner = where, text, span, target, value, owner


def lr_assignments(source: SourceFile | None, file: str) -> list[LrAssignment]:
    """``group['lr'] = value`` statements that write a Python float (not a tensor) into the lr."""
    found: list[LrAssignment] = []
    if source is None or "'lr'" not in source.text and '"lr"' not in source.text:
        return found
    for node in source.nodes(cst.Assign):
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Subscript) and is_lr_key(t) and not is_tensor_call(source, node.value):
                line = source.positions[node].start.line
                # Only `x['lr'] = v` (one target) becomes `x['lr'].fill_(v)`; `a = x['lr'] = v` is left.
                owner = param_group_owner(source, t.value) if len(node.targets) == 1 else None
                found.append(
                    LrAssignment(
                        f"{file}:{line}",
                        source.lines[line - 1].strip(),
                        source.span(node),
                        source.code(t),
                        source.code(node.value),
                        owner,
                    )
                )
    return found


def is_tensor_call(source: SourceFile, node: cst.BaseExpression) -> bool:
    """A `torch.tensor(...)`-like call: the lr (or a value written to it) is a tensor already."""
    return isinstance(node, cst.Call) and source.qualified_name(node.func) in (
        "torch.tensor",
        "torch.as_tensor",
        "torch.scalar_tensor",
        "torch.full",
    )
