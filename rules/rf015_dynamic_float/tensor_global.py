"""RF015's first fix: the module-level float held in a 0-d tensor, every assignment of it wrapped
(``MARGIN = torch.tensor(0.2 + 0.1 * epoch, dtype=torch.float64)``).

A global tensor the compiled code reads is a graph input guarded on its dtype, shape and device,
not its value: one graph serves every value, whatever ``dynamic`` says and whichever backend
compiles it (measured on torch 2.13: a margin read as ``relu(x + M) * M - (1 - M) * x``, 2 -> 1
compiles, bit for bit under eager and inductor). What keeps the results the float's is RF014's
for an attribute: every read is tensor arithmetic (a branch, ``range()``, ``math.*`` or a print
of it would see a tensor), and the dtype is the one that computes as the number did beside what
the run recorded it meeting (``analysis/zero_d_dtype.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.analysis.changing_values import Counter, GlobalState, global_writes
from recompile_fix.analysis.compiled_spans import compiled_function_spans, inside
from recompile_fix.analysis.number_shaped import number_shaped
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import TENSOR, distinct
from recompile_fix.analysis.zero_d_dtype import tensor_dtype
from recompile_fix.profile.model import Frame, Location

__all__ = ["TensorGlobal", "tensor_global"]


@dataclass
class TensorGlobal:
    """The 0-d tensor edit of one global, or why there is none."""

    location: Location | None = None  # its first assignment (where the finding goes)
    wrap: list[tuple[int, int]] = field(default_factory=list)  # the assigned values' spans
    float64: bool = False
    close: bool = False  # a float32 tensor in place of float64 arithmetic: results only close
    refused: list[str] = field(default_factory=list)  # no tensor, for these reasons
    doubts: list[str] = field(default_factory=list)  # a tensor, unproven for these
    notes: list[str] = field(default_factory=list)  # what the run showed that the source did not

    @property
    def offered(self) -> bool:
        return not self.refused and bool(self.wrap)


def tensor_global(name: str, frames: list[Frame], files: list[str], project: Project) -> TensorGlobal:
    """The 0-d tensor edit of global ``name`` of ``frames[0].file``, which ``frames`` read;
    ``files``: the profiled files (another that names it may read or set it)."""
    plan = TensorGlobal()
    state = GlobalState.find(Counter(kind="global", name=name, frames=list(frames)), project)
    source = state.source
    if source is None or state.why_not:
        plan.refused.append(state.why_not or f"cannot read {state.file}")
        return plan
    file = state.file
    assigns, others = global_writes(source, file, name)
    plan.refused.extend(f"{what} at {where}: a 0-d tensor would be replaced or shared" for what, where in others)
    for node in assigns:
        where = f"{file}:{source.positions[node].start.line}"
        code = " ".join(source.code(node).split())
        if len(node.targets) > 1:
            plan.refused.append(f"`{code}` at {where} gives the value to another name too")
        elif not number_shaped(node.value, source, node):
            # The source does not say; the run does: torch guarded the global on a float each time.
            plan.notes.append(f"`{code}` at {where}: a float in the run each time torch compiled")
        plan.wrap.append(source.span(node.value))
    if plan.refused:
        return plan
    first = source.positions[assigns[0]].start
    plan.location = Location(file=file, line=first.line, col=first.column)
    imported = _torch_import_line(source)
    if imported is not None and imported > first.line:
        plan.refused.append(f"`{name}` is assigned at {file}:{first.line}, before torch is imported (line {imported})")
        return plan

    uses = state.reads(frames[0], project)
    compiled = compiled_function_spans(frames, project)
    formats = [u for u in uses if u.kind == "format" and not inside(u.file, u.line, compiled)]
    uses = [u for u in uses if u not in formats]
    blocking = distinct(u for u in uses if u.verdict != TENSOR)
    if blocking:
        plan.refused.extend(f"`{name}` {u.describe()}" for u in blocking)
        return plan
    covered = all(inside(u.file, u.line, compiled) for u in uses)
    plan.float64, doubt, plan.close = tensor_dtype(uses, list(frames), False, bool(formats), covered)
    if doubt:
        plan.doubts.append(doubt)
    for other in files:
        text = project.source(other)
        if other != file and text is not None and name in text.text and _names(text, name):
            plan.doubts.append(f"{other} names `{name}` too: it may read or set the global")
    devices = {str(t.get("device")) for f in frames for t in f.tensor_inputs().values()} - {"None", "cpu"}
    if devices:
        plan.doubts.append(
            f"the run passed tensors on {', '.join(sorted(devices))}: a 0-d CPU tensor meets them as a number, "
            "but a program that moves it would move a global"
        )
    return plan


def _torch_import_line(source) -> int | None:
    """The line of the file's first module-level ``import torch`` (any alias), or None."""
    for statement in source.module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(source.code(a.name) == "torch" for a in small.names):
                    return source.positions[statement].start.line
    return None


def _names(source, name: str) -> bool:
    """Does ``source`` name ``name`` as a variable or an attribute (not only in a string)?"""
    return any(n.value == name for n in source.nodes(cst.Name))
