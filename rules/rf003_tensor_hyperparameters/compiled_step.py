"""The compiled optimizer step: where the program compiles it (``compiled_step``: static mode's
pattern), and RF003's other fix there, ``dynamic=True`` at its ``torch.compile`` call.

torch traces a float it does not specialise as a float input (``specialize_float=False``, the
default since 2.6), but under ``dynamic=None`` only after the value changed once: the step
compiles for the first lr, then once more, dynamic. With ``dynamic=True`` the lr is a float
input from the first compile, so that recompile goes, and the update still reads a Python float,
so it rounds as before (measured on torch 2.13, Adam under ExponentialLR: the parameters bit for
bit, 5 -> 4 compiles, as PGO's second run). It also traces the step's tensors' sizes as dynamic.
Where the compiled code is only the optimizer's step, those are the parameters and their state,
whose sizes never change, and the update is pointwise: safe (measured on torch 2.13, inductor on
CPU, Adam and AdamW under Cosine and Exponential schedules over 81 parameters of 40 sizes: the
parameters bit for bit, 5 -> 4 compiles, 38 s of compiling where the static step took 48 s), and
the tensor lr, which rounds differently, becomes its fallback. Where it compiles more (a whole
training step) it is a trade-off, or unproven under a backend that generates no kernels
(``backend="eager"``: no kernel is specialised on a size). It works where a tensor lr cannot (a ``OneCycleLR`` changing
``betas`` beside the lr, a scheduler that writes Python floats back). CUDA graphs
(``mode="reduce-overhead"``) specialise floats: no fix there.
"""

from __future__ import annotations

import os
import re

import libcst as cst

from recompile_fix.analysis.call_site_code import find_compile_call, root_name, runs_cuda_graphs
from recompile_fix.analysis.compile_calls import generates_no_kernels
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.compile_keyword import compile_call_params
from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Finding, Safety
from recompile_fix.findings.releases import DYNAMIC_FLOATS
from recompile_fix.profile.model import Frame, Location, Profile

__all__ = [
    "compiled_step",
    "dynamic_step_finding",
    "floats_reach_the_step",
    "innermost_user_location",
]

_OPTIMIZER_METHODS = frozenset({"step", "zero_grad"})
# The optimizers whose lr inductor's tensorify pass turns into a tensor operand (``floats_reach_the_step``).
_TENSORIFIED_LR = re.compile(r"(?:^|/)torch/optim/(?:adam|adamw)\.py$")


def dynamic_step_finding(
    frame: Frame, project: Project, release: tuple[int, int] | None, message: str, evidence: dict
) -> Finding | None:
    """``dynamic=True`` at the compile call that compiles ``frame``'s optimizer step, or None where
    it would not help (the torch that ran specialises floats, CUDA graphs) or the call is not
    found."""
    if not DYNAMIC_FLOATS.runs_on(release):
        return None
    site = innermost_user_location(frame)
    source = project.source(site.file) if site is not None else None
    if site is None or source is None:
        return None
    found = _compile_of(project, source, site)
    if found is None:
        return None
    compile_source, node, only_the_step = found
    if runs_cuda_graphs(compile_source, node):
        return None
    notes = [
        "with `dynamic=True` torch traces the float as an input from the first compile (without it, "
        "only once it has changed), and the update reads a Python float as before: the same rounding "
        "(measured on torch 2.13, Adam under ExponentialLR: the parameters bit for bit, 5 -> 4 compiles)",
    ]
    if only_the_step:
        notes.append(
            "it also traces the step's tensors' sizes as dynamic: the parameters and their state, whose "
            "sizes do not change, in a pointwise update (measured on torch 2.13, inductor on CPU, Adam "
            "and AdamW: bit for bit, and less compile time than the static step's two compiles)"
        )
    elif generates_no_kernels(node):
        notes.append(
            "the compiled code does more than the optimizer step: `dynamic=True` traces the sizes of every "
            "tensor it reads as dynamic; its backend generates no kernels, so none is traded: unproven, "
            "`fix` keeps it where a run shows fewer compiles and the outputs bit for bit"
        )
    else:
        notes.append(
            "the compiled code does more than the optimizer step: `dynamic=True` traces the sizes of "
            "every tensor it reads as dynamic (kernels that cannot specialise on sizes): a trade-off"
        )
    unsafe_because = UNPROVEN if generates_no_kernels(node) and not only_the_step else TRADE_OFF
    return Finding(
        rule="RF003",
        file=site.file,  # find_compile_call looks in the site's own file
        location=compile_source.location_of(node, site.file),
        safety=Safety.SAFE if only_the_step else Safety.UNSAFE,
        evidence=evidence,
        notes=notes,
        params=compile_call_params(compile_source, node),
        message=message,
        unsafe_because=unsafe_because,
    )


def floats_reach_the_step(profile: Profile, frame: Frame, keys: set[str]) -> bool:
    """Does a float input make the step compile once under the backend the program uses? Under
    its own eager backend, yes. Under inductor only where torch's tensorify pass turns the float
    into a tensor operand: Adam's and AdamW's lr (measured, torch 2.13: 1 graph, bit for bit);
    SGD's `add_(grad, alpha=-lr)` and the betas of Adam's `lerp_` specialise the graph on the
    value again (a new user's trial: SGD under StepLR 4 -> 4 under inductor, 4 -> 3 under eager).
    A backend `profile --backend` forced says nothing of the program's own: inductor assumed."""
    backends = set(frame.backends)
    if profile.backend is None and backends and backends <= {"eager", "aot_eager"}:
        return True
    return keys == {"lr"} and _TENSORIFIED_LR.search(frame.file.replace(os.sep, "/")) is not None


def innermost_user_location(frame: Frame) -> Location | None:
    """The user line nearest the optimizer step on its compiles' stacks (its call, or the
    compiled function's call of it)."""
    for compile_ in frame.compiles:
        for location in reversed(compile_.stack):
            if not os.path.isabs(location.file):
                return location
    return None


def _compile_of(project: Project, source: SourceFile, site: Location) -> tuple[SourceFile, cst.CSTNode, bool] | None:
    """The compile call (or bare decorator) of the compiled code that runs the step at ``site``,
    and whether that code is only the optimizer's step: a compiled function around the line
    (``@torch.compile def step(): opt.step()``), else what the line calls (``torch.compile(opt.step)``)."""
    func = _enclosing_function(source, site.line)
    if func is not None:
        found = find_compile_call(project, site.file, {func.name.value})
        if found is not None:
            return found[0], found[1], _only_optimizer_calls(func)
    called = {root_name(c.func) for c in source.nodes(cst.Call) if source.positions[c].start.line == site.line}
    found = find_compile_call(project, site.file, {n for n in called if n})
    if found is None:
        return None
    compile_source, node, _ = found
    target = node.args[0].value if isinstance(node, cst.Call) and node.args else None
    only_the_step = isinstance(target, cst.Attribute) and target.attr.value == "step"
    return compile_source, node, only_the_step


def _enclosing_function(source: SourceFile, line: int) -> cst.FunctionDef | None:
    inside = [
        f
        for f in source.nodes(cst.FunctionDef)
        if source.positions[f].start.line <= line <= source.positions[f].end.line
    ]
    return max(inside, key=lambda f: source.positions[f].start.line, default=None)


def _only_optimizer_calls(func: cst.FunctionDef) -> bool:
    """Is the body only ``<opt>.step()`` / ``<opt>.zero_grad()`` calls (and a docstring)?"""
    body = func.body.body if isinstance(func.body, cst.IndentedBlock) else [func.body]
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
                continue
            call = small.value if isinstance(small, cst.Expr) else None
            if not (
                isinstance(call, cst.Call)
                and isinstance(call.func, cst.Attribute)
                and call.func.attr.value in _OPTIMIZER_METHODS
            ):
                return False
    return True


def compiled_step(source: SourceFile, optimizer: str) -> int | None:
    """The line of compiled code that calls ``optimizer.step()``: a function decorated with
    ``torch.compile`` or passed to it, or ``torch.compile(optimizer.step)``."""
    compiled_names = set()
    for call in source.nodes(cst.Call):
        if source.qualified_name(call.func) == "torch.compile" and call.args:
            target = source.code(call.args[0].value)
            if target == f"{optimizer}.step":
                return source.positions[call].start.line
            compiled_names.add(target)
    for func in source.nodes(cst.FunctionDef):
        decorated = any(
            source.qualified_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
            == "torch.compile"
            for d in func.decorators
        )
        if not decorated and func.name.value not in compiled_names:
            continue
        for call in _calls_in(func):
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "step"
                and source.code(call.func.value) == optimizer
            ):
                return source.positions[func].start.line
    return None


def _calls_in(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        stack.extend(current.children)
