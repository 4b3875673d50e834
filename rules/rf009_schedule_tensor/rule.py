"""RF009 schedule-tensor: a numpy array or list indexed by a changing Python int inside compiled
code recompiles the frame for every index."""

from __future__ import annotations

import os
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_sites import Parameter, call_sites, calls, compiled_function, is_tensor_call
from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.cst_names import is_load
from recompile_fix.analysis.cst_walk import dotted_name, is_name, walk
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import TENSOR, ScalarUses, Scope, Use, consequence, distinct
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.torch_vocabulary import FLOATING
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.profile.resume import function_of

__all__ = ["RULE", "ScheduleTensor"]


_BEFORE = """        self.schedule = np.linspace(1.0, 0.1, 20)

    def forward(self, x, epoch):
        h = self.fc(x)
        t = self.schedule[epoch]
        return h * t


torch.manual_seed(0)
model = torch.compile(Model())
x = torch.randn(4, 8)
for epoch in range(10):
    model(x, epoch)
"""


class ScheduleTensor(Rule):
    """
    ## What it does
    Where compiled code indexes a numpy array or a list by an int argument that changes between
    calls (`t = self.schedule[epoch]`), holds the schedule in a tensor built once
    (`self.register_buffer("schedule", torch.tensor(np.linspace(...)), persistent=False)`),
    reads it with `torch.take`, and passes the int as a 0-d tensor at the call
    (`model(x, torch.tensor(epoch))`).

    ## Why is this bad?
    `torch.compile` guards the index on its value (`epoch == 1`): indexing a list specialises
    every value (automatic dynamic does not help), and a numpy array indexed by a dynamic int
    breaks the graph. Each epoch compiles the frame again, until the recompile limit stops
    compiling it. A tensor indexed by a 0-d tensor is one graph for every epoch.

    ## Example
    ```python
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.schedule = np.linspace(1.0, 0.1, 20)

        def forward(self, x, epoch):
            return x * self.schedule[epoch]
    ```
    Use instead:
    ```python
            self.register_buffer("schedule", torch.tensor(np.linspace(1.0, 0.1, 20)), persistent=False)

        def forward(self, x, epoch):
            return x * torch.take(self.schedule, torch.as_tensor(epoch, device=self.schedule.device))
    ```
    and `model(x, torch.tensor(epoch))` at the call.

    ## Fix safety
    `torch.take` with a 0-d index gives a 0-d tensor of the schedule's dtype (float64 for a
    numpy float array, and for a list of floats, which is built with `dtype=torch.float64` so no
    value is rounded); a float64 0-d tensor that meets float tensors of rank >= 1 computes what the
    number did, bit for bit. The buffer is not persistent (`state_dict()` is unchanged) and moves
    with `.to(device)`; `torch.as_tensor` keeps a call that still passes an int working. The
    fix is safe when the schedule is built once in `__init__`, nothing else reads or writes it,
    the int has no other use that needs a number, and the value read is only used in tensor
    arithmetic with float tensors of rank >= 1 that the Profile shows; unsafe when those tensors
    are not known; no fix, with the reason, otherwise.

    ## Profile evidence
    `epoch == 1  # t = self.schedule[epoch]  # model.py:16 in forward` (for a list, with
    `_dynamo/variables/lists.py:174 in getitem_const`), repeated for each epoch up to the
    recompile limit; for a numpy array under `dynamic=None`, a graph break at that line,
    "TypeError when making fake tensor call".
    """

    id = "RF009"
    name = "schedule-tensor"
    message = (
        "`{container}[{param}]` in compiled `{frame}` indexes a {kind} by an int that changes ({values}; "
        "{compiles} compiles{limit}): {fix}"
    )
    consumes = ("scalar_value",)
    triggers = ("[",)
    emits = (
        TorchApi("torch.tensor", None, "every release"),
        TorchApi("torch.take", None, "every release"),
        TorchApi("torch.as_tensor", None, "every release"),
    )
    examples = (
        Example(
            before=_BEFORE,
            after=_BEFORE.replace(
                "self.schedule = np.linspace(1.0, 0.1, 20)",
                'self.register_buffer("schedule", torch.tensor(np.linspace(1.0, 0.1, 20)), persistent=False)',
            )
            .replace(
                "t = self.schedule[epoch]",
                "t = torch.take(self.schedule, torch.as_tensor(epoch, device=self.schedule.device))",
            )
            .replace("model(x, epoch)", "model(x, torch.tensor(epoch))"),
            golden="RF009/numpy_schedule",
        ),
        Example(  # the list is also read as a list (len): no edit
            before="        self.warmup = [0.25, 0.5, 0.75, 1.0]\n",
            after=None,
            golden="RF009/schedule_read_elsewhere",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings: list[Finding] = []
        for frame in profile.frames:
            if os.path.isabs(frame.file):
                continue
            seen = set()
            for reason in frame.reasons():
                param = reason.source or ""
                if (
                    reason.kind != "scalar_value"
                    or not param.isidentifier()
                    or reason.value_type != "int"
                    or reason.first_use is None
                    or param in seen
                ):
                    continue
                seen.add(param)
                findings.extend(self._plan(frame, param, reason.first_use.line, project))
        return findings

    def _plan(self, frame: Frame, param: str, line: int, project: Project) -> list[Finding]:
        source = project.source(frame.file)
        function_name = function_of(frame.name) or frame.name
        func = compiled_function(source, frame, function_name) if source is not None else None
        if source is None or func is None:
            return []
        subscript = _schedule_read(source, func, param, line)
        if subscript is None:
            return []  # not a schedule read (RF002 says why a tensor cannot replace the int)
        attr = subscript.value.attr.value  # type: ignore[attr-defined]
        values = sorted({r.value for r in frame.reasons() if r.source == param and isinstance(r.value, int)})
        shown = ", ".join(map(str, values[:3])) + (", ..." if len(values) > 3 else "")
        pos = source.positions[subscript]
        location = Location(
            file=frame.file, line=pos.start.line, col=pos.start.column, end_col=pos.end.column, function=frame.name
        )
        evidence = frame_evidence(frame, [r for r in frame.reasons() if r.source == param], values=values[:10])
        covers = [cover(frame, [param], self.consumes)]
        kind = "list or array"

        def finding(fix: str, safety: Safety, notes: list[str], params=None, where: Location = location) -> Finding:
            return Finding(
                rule=self.id,
                file=where.file,
                location=where,
                message=self.message.format(
                    container=f"self.{attr}",
                    param=param,
                    frame=function_name,
                    kind=kind,
                    values=shown,
                    compiles=len(frame.compiles),
                    limit=", recompile limit hit" if frame.limit_hits else "",
                    fix=fix,
                ),
                safety=safety,
                params=params or {},
                evidence=evidence,
                notes=notes,
                covers=covers,
            )

        no_fix = "it stays as it is"
        classes = ClassIndex(project)
        cls = source.enclosing_class(func)
        if cls is None:
            return [finding(no_fix, Safety.NONE, [f"`{function_name}` is not a method: no module to hold a buffer"])]
        ref = ClassRef(frame.file, source, cls)
        is_module, why = classes.is_module(ref)
        if not is_module:
            return [finding(no_fix, Safety.NONE, [f"{why}: no buffer to hold the schedule"])]
        built = _definition(ref, attr, source)
        if isinstance(built, str):
            return [finding(no_fix, Safety.NONE, [built])]
        assign, what = built
        kind = what
        others = _other_uses(attr, subscript, assign, project, [p for p in project.expected_hashes or {}])
        if others:
            return [finding(no_fix, Safety.NONE, [f"`self.{attr}` is also used as a {what}: {others}"])]
        analysis = ScalarUses(read=project.source, classes=classes)
        tensors = _recorded_tensors(frame)
        refused = _index_refusal(analysis, source, frame.file, func, param, line, set(tensors))
        if refused:
            return [finding(no_fix, Safety.NONE, refused)]
        scope = analysis.scope(source, frame.file, func, set(tensors))
        value_uses = analysis.of_expression(subscript, scope)
        blocked = distinct(u for u in value_uses if u.verdict != TENSOR)
        if blocked:
            notes = [f"the value read {u.describe()}: {consequence(u)}" for u in blocked]
            return [finding(no_fix, Safety.NONE, notes + ["a 0-d tensor would not serve there; no edit"])]
        safety, notes = _exactness(value_uses, tensors, func, scope, source)
        params, note = _buffer_edits(source, attr, what, assign, subscript, param)
        notes.append(note)
        fix = f"hold it in a tensor and pass `{param}` as a 0-d tensor"
        findings = [finding(fix, safety, notes, params)]
        findings.extend(self._call_sites(frame, function_name, func, param, source, project, finding, fix, safety))
        for made in findings:  # dtypes and ranks the run did not show: a run of the program settles them
            made.unsafe_because = UNPROVEN
        return findings

    def _call_sites(self, frame, function_name, func, param, source, project, finding, fix, safety) -> list[Finding]:
        position = Parameter.of(source, func, param)
        if position is None:
            return []
        found = []
        for site, call, compiled in calls(call_sites(frame, function_name), project):
            if call is None:
                continue
            arg, _ = position.argument_of(call)
            file = project.source(site.file)
            if arg is None or file is None or is_tensor_call(arg.value, file):
                continue
            where = file.location_of(call, site.file, site.function)
            notes = [f"the call passes `{param}` as a 0-d int64 tensor, which `torch.take` indexes with"]
            if not compiled:
                notes.append(f"this call of `{function_name}` did not compile; it is wrapped too")
            found.append(finding(fix, safety, notes, {"wrap": list(file.span(arg.value))}, where))
        return found

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        edits = []
        for start, end, text in p.get("replace", []):
            edits.append(Edit(finding.file, start, end, text.replace("torch.", f"{torch_name}."), self.id))
        if "wrap" in p:
            start, end = p["wrap"]
            edits.append(Edit(finding.file, start, end, f"{torch_name}.tensor({source.text[start:end]})", self.id))
        return edits


def _schedule_read(source: SourceFile, func: cst.FunctionDef, param: str, line: int) -> cst.Subscript | None:
    """``self.<schedule>[param]`` on ``line`` of the compiled function, the read the guard is on."""
    return next(
        (
            n
            for n in walk(func)
            if isinstance(n, cst.Subscript)
            and source.positions[n].start.line == line
            and len(n.slice) == 1
            and isinstance(n.slice[0].slice, cst.Index)
            and is_name(n.slice[0].slice.value, param)
            and isinstance(n.value, cst.Attribute)
            and is_name(n.value.value, "self")
        ),
        None,
    )


def _index_refusal(
    analysis: ScalarUses, source: SourceFile, file: str, func: cst.FunctionDef, param: str, line: int, tensors: set[str]
) -> list[str] | None:
    """Why a 0-d tensor cannot be the index: its other uses, beyond the schedule read on
    ``line``; None when every one takes a tensor."""
    index_uses = [
        u
        for u in analysis.of_parameter(source, file, func, param, tensors)
        if not (u.kind in ("index", "slice", "sequence_index") and u.line == line)
    ]
    blocking = distinct(u for u in index_uses if u.verdict != TENSOR)
    if not blocking:
        return None
    notes = [f"`{param}` {u.describe()}: {consequence(u)}" for u in blocking]
    return notes + ["a 0-d tensor index would not serve there; no edit"]


def _buffer_edits(
    source: SourceFile, attr: str, what: str, assign: cst.Assign, subscript: cst.Subscript, param: str
) -> tuple[dict[str, Any], str]:
    """The fix's params: the schedule's assignment becomes a buffer, its read a ``torch.take``;
    and the note that says so."""
    dtype = ", dtype=torch.float64" if what == "list" else ""
    buffer = f'self.register_buffer("{attr}", torch.tensor({source.code(assign.value)}{dtype}), persistent=False)'
    read = f"torch.take(self.{attr}, torch.as_tensor({param}, device=self.{attr}.device))"
    note = (
        f"`self.{attr}` becomes a non-persistent buffer (state_dict unchanged; it moves with `.to()`), "
        f"read with torch.take; the calls pass `{param}` as a 0-d int64 tensor"
    )
    return {"replace": [[*source.span(assign), buffer], [*source.span(subscript), read]]}, note


def _definition(ref: ClassRef, attr: str, source: SourceFile) -> tuple[cst.Assign, str] | str:
    """The one ``self.<attr> = <numpy array or list>`` in ``__init__``, and "numpy array" or
    "list"; else why not."""
    assigns = [
        n
        for n in walk(ref.node)
        if isinstance(n, cst.Assign) and any(dotted_name(t.target) == f"self.{attr}" for t in n.targets)
    ]
    init = next(
        (s for s in ref.node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"),
        None,
    )
    if len(assigns) != 1 or init is None or len(assigns[0].targets) != 1:
        return f"`self.{attr}` is not assigned exactly once, in `{ref.name}.__init__`: cannot tell what it holds"
    assign = assigns[0]
    if init not in set(source.ancestors(assign)):
        return f"`self.{attr}` is assigned outside `{ref.name}.__init__`"
    value = assign.value
    if isinstance(value, cst.Call) and source.qualified_name(value.func).startswith("numpy."):
        return assign, "numpy array"
    if isinstance(value, (cst.List, cst.ListComp)) or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "tolist"
    ):
        return assign, "list"
    return f"`self.{attr} = {source.code(value)}`: not a numpy call or a list, cannot tell what it holds"


def _other_uses(attr: str, subscript: cst.Subscript, assign: cst.Assign, project: Project, files: list[str]) -> str:
    """Reads or writes of ``.<attr>`` in the profiled files besides this one read and the
    definition, as "file:line (`code`)" for the note; empty when there are none."""
    found = []
    for file in files:
        if os.path.isabs(file):
            continue
        source = project.source(file)
        if source is None:
            continue
        for node in source.nodes(cst.Attribute):
            if node.attr.value != attr or node is subscript.value:
                continue
            if any(node is t.target for t in assign.targets):
                continue
            line = source.positions[node].start.line
            found.append(f"{file}:{line} (`{source.lines[line - 1].strip()}`)")
    return ", ".join(found[:3])


def _exactness(uses: list[Use], tensors: dict, func: cst.FunctionDef, scope: Scope, source: SourceFile):
    """Safe when every tensor the value meets is a floating tensor of rank >= 1 the Profile
    recorded, or a local computed from one by a call (``h = self.fc(x)``)."""
    derived = _derived_from_inputs(func, source, tensors)
    unknown = sorted({m for u in uses for m in u.meets if m not in derived and not _computed_from(m, derived)})
    if unknown or any(not u.exact or u.float64_only for u in uses):
        return Safety.UNSAFE, [
            f"it meets {', '.join(f'`{m}`' for m in unknown) or 'tensors'} of unknown dtype or rank: a float64 0-d "
            "tensor keeps the results only where they are floating and of rank >= 1"
        ]
    return Safety.SAFE, [
        "a float64 0-d tensor meeting floating tensors of rank >= 1 computes what the number did, bit for bit"
    ]


def _recorded_tensors(frame: Frame) -> dict[str, dict]:
    """The frame's tensor arguments (plain names) and the tensors its module holds itself
    (``self.scale``: a buffer or parameter, whose dtype and rank the recorder keeps), by the
    names the compiled code reads them with."""
    return {
        n: e
        for n, e in frame.tensor_inputs().items()
        if n.isidentifier() or (n.startswith("self.") and n[5:].isidentifier())
    }


def _computed_from(code: str, known: set[str]) -> bool:
    """Is ``code`` (``self.proj(x)``) a module call or arithmetic on one of ``known``?"""
    try:
        expr = cst.parse_expression(code)
    except cst.ParserSyntaxError:
        return False
    if not isinstance(expr, (cst.Call, cst.BinaryOperation)):
        return False
    return any(isinstance(n, cst.Name) and n.value in known for n in walk(expr))


def _derived_from_inputs(func: cst.FunctionDef, source: SourceFile, tensors: dict) -> set[str]:
    """Names of floating rank >= 1 tensors: recorded inputs, and locals assigned once from an
    expression (a module call, arithmetic) on them."""
    known = {n for n, e in tensors.items() if e.get("dtype") in FLOATING and e.get("shape")}
    assigns: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(func):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            assigns.setdefault(node.targets[0].target.value, []).append(node.value)
    changed = True
    while changed:
        changed = False
        for name, values in assigns.items():
            if name in known or len(values) != 1:
                continue
            reads = {n.value for n in walk(values[0]) if isinstance(n, cst.Name) and is_load(source, n)}
            if reads & known:
                known.add(name)
                changed = True
    return known


RULE = ScheduleTensor()
