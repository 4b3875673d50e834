"""RF014 float-attribute: a float held in an object's attribute (a loss margin, a fade-in alpha)
that the program changes between calls of compiled code recompiles it; assigned as a 0-d tensor,
it is a graph input instead."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from recompile_fix.analysis.changing_values import (
    ATTRIBUTE_SOURCE,
    AttributeState,
    Counter,
    counter_owner,
    holder_class,
)
from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.compiled_spans import Span, compiled_function_spans, inside
from recompile_fix.analysis.cst_walk import is_name
from recompile_fix.analysis.number_shaped import number_shaped
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import TENSOR, Use, distinct
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.unprofiled_imports import read_in_unprofiled_imports
from recompile_fix.analysis.zero_d_dtype import tensor_dtype
from recompile_fix.edits.compile_keyword import compile_keyword_edits, one_per_compile_call
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.zero_d_tensor import bit_identical_note, wrap_edits
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.profile.sources import attribute_path
from recompile_fix.rules.rf014_float_attribute.dynamic import NOT_A_TENSOR as _NOT_A_TENSOR
from recompile_fix.rules.rf014_float_attribute.dynamic import dynamic_compile

__all__ = ["RULE", "FloatAttribute"]

_KINDS = ("module_attribute", "scalar_value")


class FloatAttribute(Rule):
    """
    ## What it does
    Assigns a float attribute that the program changes between calls of compiled code (a margin
    annealed per epoch, a progressive-growing GAN's fade-in `alpha`) as a 0-d tensor: every
    assignment `obj.alpha = value` of it becomes `obj.alpha = torch.tensor(value, ...)`, in
    `__init__` and wherever the program sets it.

    ## Why is this bad?
    `torch.compile` guards a float read from an nn.Module attribute on its value
    (`self.alpha == 0.3333333333333333`): the next value compiles the frame again. With
    `dynamic=None` the float is made dynamic after that, so each such attribute costs a
    recompile per compiled frame that reads it; with `dynamic=False`, or where the guard on
    another attribute failed first, one per value. PyTorch's profile-guided dynamism does
    not mark attributes. A 0-d tensor attribute is a graph input guarded on its dtype and shape
    only: one graph serves every value (measured on torch 2.13: a fade-in `alpha` and a margin,
    2 compiles -> 1 per frame, eager and inductor).

    ## Example
    ```python
    class MarginLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.margin = 0.5

    for epoch in range(epochs):
        criterion.margin = 0.5 + 0.25 * epoch
    ```
    Use instead:
    ```python
    class MarginLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.margin = torch.tensor(0.5)

    for epoch in range(epochs):
        criterion.margin = torch.tensor(0.5 + 0.25 * epoch)
    ```

    ## Fix safety
    Every read of the attribute in the profiled files must be tensor arithmetic (the analysis
    RF002 uses): a read in a Python branch, `range()`, `math.*`, a format string in compiled
    code (a graph break) or a call whose source cannot be read makes no edit, and the finding
    names it. Outside compiled code, `f"{margin:.2f}"` prints a float64 0-d tensor as it printed
    the float. A read that meets a field of a module's output (`backbone(x).last_hidden_state`),
    which the source does not type, is taken for tensor arithmetic, unproven. The tensor's dtype
    keeps the results: a float met directly stays at the default dtype, which computes as the
    Python float did beside a float32 tensor or a half one of rank >= 1 (beside a 0-d half
    tensor it would make the result float32, beside a float64 one round the number first); one
    that goes through Python arithmetic first (`1 - self.alpha`) or is updated in place (`+=`)
    becomes float64, which does that arithmetic as Python does and computes as the float did
    beside a floating tensor of rank >= 1. What it meets is known from the arguments the run
    recorded, or, where every read is in compiled code, from every tensor the compiled graphs'
    float constants met, as the recorder read them from each graph (`float32:2`); otherwise
    the fix is unproven, and `fix` runs it and keeps it only with the same outputs. Where the
    run recorded it meeting a 0-d float32 tensor (a loss weight times a loss), a float64 one
    would make that result float64: it stays at the default dtype, and its own arithmetic
    rounds in float32, so `fix` keeps it where the outputs are close (assert_close). A number
    divided by the attribute's tensor (`self.radius / x`) computes close, not bit-identically
    (torch divides a number as `reciprocal(x) * c`): unproven, kept where close. Where the 0-d
    tensor is unproven, `dynamic=True` at the compile call of the module that reads it is its
    fallback (one for every such float of the frame), which `fix` tries where the 0-d tensor is
    not kept: torch traces the float as an input from the first compile, and the code computes
    with its Python float (a distillation loss: 3 -> 2 compiles, bit for bit); unproven too,
    since every tensor size of the frame becomes dynamic, and a trade-off where the call
    compiles a whole model with a backend that generates kernels. Where the code reads the float
    as a Python number (a branch on it), `dynamic=True` there is the one fix, unproven: torch may
    guard the branch's outcome only, or the value all the same, which only a run shows. So is a
    library class's float the program sets (transformers' `PatchTSTMasking.random_mask_ratio`,
    read in `int(n * (1 - ratio))`): the library's reads are not the program's to see.

    Every assignment is rewritten or none is, across files too (set in `model.py`'s
    `__init__`, changed by `train.py`'s loop: a finding per file, made together or not at
    all); one whose object the source cannot tie to the
    attribute's class (`args.alpha = ...` beside `model.alpha`), a `setattr` that may write it, a read in an imported file no compile ran through, an
    in-place update of a tensor two objects share, a `None` it is set to, or a value that may
    not be a number (a parameter passed in) makes the fix unproven; so does another float of
    the same frame that stays a float (the frame would still recompile). A plain attribute does
    not move with `.to(device)`: where the run saw tensors off the CPU the fix is unproven.

    ## Profile evidence
    The value guard on the attribute (`self.alpha == 0.3333333333333333`, a `module_attribute`
    or `scalar_value` reason with a float value) and the attribute's value the recorder kept at
    each compile of the frame (`self.alpha`), so an attribute whose guard torch did not report
    (another guard failed first) is found too; the class of the object holding it, as recorded;
    the dtype and rank of the tensors each graph's float constants meet (`float_operands`).
    """

    id = "RF014"
    name = "float-attribute"
    message = "{name} {verb} between calls of compiled `{frame}` ({values}; {compiles} compiles{limit}): {fix}"
    consumes = _KINDS
    triggers = ("compile",)
    emits = (TorchApi("torch.tensor", None, "every release"),)
    finding_only = False
    examples = (
        Example(
            before="        self.scale = 0.0\n\n    def forward(self, x):\n        return x + self.scale * self.proj(x)\n"
            '\n\ntorch.manual_seed(0)\nmodel = WarmResidual()\ncompiled = torch.compile(model, backend="eager")\n'
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nlosses = []\nfor step in range(6):\n"
            "    model.scale = min(1.0, step / 4)\n",
            after="        self.scale = torch.tensor(0.0)\n\n    def forward(self, x):\n        return x + self.scale * self.proj(x)\n"
            '\n\ntorch.manual_seed(0)\nmodel = WarmResidual()\ncompiled = torch.compile(model, backend="eager")\n'
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nlosses = []\nfor step in range(6):\n"
            "    model.scale = torch.tensor(min(1.0, step / 4))\n",
            golden="RF014/residual_warmup",
        ),
        Example(  # the forward needs the float in a Python branch: no edit
            before="        if self.alpha >= 1.0:\n            return self.new(x)\n",
            after=None,
            golden="RF014/alpha_in_branch",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        attributes: dict[tuple, Counter] = {}
        owners: dict[tuple, tuple[str, str, str] | None] = {}
        for frame in profile.frames:
            library = os.path.isabs(frame.file)
            for source, value in _changing_floats(frame):
                # `self._modules['criterion'].margin`: the loss a compiled model holds
                match = ATTRIBUTE_SOURCE.match(attribute_path(source))
                if match is None:
                    continue
                root = match.group("root") + match.group("rest")
                if library:
                    # Library code's own attribute is not the user's to edit; a module of the user's
                    # that library code runs (a LoRA layer swapped into a transformers model) is, by
                    # the class the run recorded, else by name (unproven, see `_plan`).
                    recorded = frame.module_class(root)
                    owners[frame.key, root] = (*recorded, "recorded") if recorded is not None else None
                if (frame.key, root) not in owners:
                    owners[frame.key, root] = counter_owner(frame, root, project)
                owner = owners[frame.key, root]
                key = (owner, match.group("attr"))
                attribute = attributes.setdefault(key, Counter(kind="attribute", name=key[1], owner=owner))
                attribute.add(frame, source, None)
                for v in value:
                    attribute.add(frame, source, v)
        plans = _merged(p for p in (self._plan(a, profile, project) for a in attributes.values()) if p is not None)
        for plan in plans:
            for other in plans:
                if other is plan or not other.why_not or plan.why_not:
                    continue
                shared = [
                    f for a in plan.merged for f in a.frames if any(f is g for b in other.merged for g in b.frames)
                ]
                if shared:
                    plan.doubts.append(
                        f"`{other.labels[0]}` also changes between calls of compiled `{shared[0].name}` and stays a "
                        "float: this fix alone may remove no compile there"
                    )
        found: list[Finding] = []
        dynamics: dict[str, list[Finding]] = {}  # by the frame they are about
        for plan in plans:
            finding = self._finding(plan)
            frames = list({id(f): f for a in plan.merged for f in a.frames}.values())
            labels = list(dict.fromkeys(plan.labels))
            one = frames[0] if len(frames) == 1 else None
            dynamic = dynamic_compile(finding, one, labels, project, profile.torch_release) if one else None
            # Where the code reads it as a number, `dynamic=True` is the one fix, for a run to prove.
            found.extend([] if dynamic is not None and not dynamic.fallback else self._per_file(finding, plan))
            if dynamic is not None and one is not None:
                dynamics.setdefault(one.shown_name, []).append(dynamic)
        return found + [f for name, group in dynamics.items() for f in one_per_compile_call(group, name)]

    def _plan(self, attribute: Counter, profile: Profile, project: Project) -> "_Plan | None":
        frame = attribute.frames[0]
        files = [p for p in profile.sources if not os.path.isabs(p) and project.source(p) is not None]
        state = AttributeState.find(attribute, frame, files, project)
        plan = _Plan(attribute, state.label or attribute.name)
        if attribute.owner is None and all(os.path.isabs(f.file) for f in attribute.frames) and not state.why_not:
            plan.doubts.append(
                f"library code (`{frame.shown_name}`) reads it and the run did not record which module holds it: "
                f"`{state.label}` by name, the one class in the profiled files that assigns `{attribute.name}`"
            )
        fallback = attribute.first_use or Location(file=frame.file, line=frame.first_line)
        if attribute.owner is not None and os.path.isabs(attribute.owner[0]):
            # A library class's float (transformers' PatchTSTMasking.random_mask_ratio, set by the
            # loop): its reads are the library's, which may take it as a Python number (`int(n * r)`).
            plan.refuse(
                f"{_NOT_A_TENSOR}`{plan.label}` is read by library code ({attribute.owner[1]} in "
                f"{attribute.owner[0]}), which may take it as a Python number",
                fallback,
            )
            return plan
        if state.why_not:
            plan.refuse(state.why_not, state.why_not_location or fallback)
            return plan
        writes, doubts = _writes(state, project)
        plan.writes = writes
        plan.doubts.extend(doubts)
        assigned = [w for w in writes if w.rhs is not None]
        if not assigned:
            plan.refuse(f"no assignment of `{attribute.name}` found in the profiled files", fallback)
            return plan
        compiled = _compiled_spans(state, attribute.frames, project)
        uses, formats, blocking = _reads(state, frame, project, compiled, output_fields=False)
        if blocking:
            # Would it serve if the fields of a module's output (`backbone(x).last_hidden_state`)
            # held tensors? The source does not say: then a run must prove it.
            guessed = _reads(state, frame, project, compiled, output_fields=True)
            if not guessed[2] and state.fields_taken:
                uses, formats, blocking = guessed
                fields = ", ".join(f"`{f}`" for f in dict.fromkeys(state.fields_taken))
                plan.doubts.append(
                    f"{fields} taken for a tensor (a field of a module's output; the source does not say what it holds)"
                )
        if blocking:
            plan.refuse([f"not a tensor: `{plan.label}` {u.describe()}" for u in blocking], fallback)
            return plan
        plan.location = assigned[0].location
        elsewhere = read_in_unprofiled_imports(attribute.name, files, project)
        if elsewhere is not None:
            plan.doubts.append(f"{elsewhere} reads `.{attribute.name}` in a file no compile ran through")
        plan.doubts.extend(_setattr_writes(attribute.name, files, project))
        in_place = any(w.rhs is None for w in writes)
        covered = all(_inside(u, compiled) for u in uses)
        plan.float64, dtype_doubt, plan.close = tensor_dtype(uses, attribute.frames, in_place, bool(formats), covered)
        if dtype_doubt:
            plan.doubts.append(dtype_doubt)
        devices = {str(t.get("device")) for f in attribute.frames for t in f.tensor_inputs().values()} - {"None", "cpu"}
        if devices:
            plan.doubts.append(
                f"the run passed tensors on {', '.join(sorted(devices))}: a plain attribute stays on the CPU "
                "when the module moves (a 0-d CPU tensor meets them as a number; a buffer would move)"
            )
        return plan

    def _finding(self, plan: "_Plan") -> Finding:
        frames: list[Frame] = []
        for frame in (f for a in plan.merged for f in a.frames):
            if not any(frame is seen for seen in frames):
                frames.append(frame)
        compiles = sum(f.compile_count for f in frames)
        limit = sum(f.limit_hits for f in frames)
        values = list(dict.fromkeys(v for a in plan.merged for v in a.values))
        shown = ", ".join(_short(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
        shown = shown or "values not recorded"
        if plan.why_not:
            fix, safety = "it stays a float", Safety.NONE
        else:
            fix = "assign it as a 0-d tensor" if len(plan.merged) == 1 else "assign them as 0-d tensors"
            safety = Safety.UNSAFE if plan.doubts else Safety.SAFE
        labels = list(dict.fromkeys(plan.labels))
        message = self.message.format(
            name=" and ".join(f"`{label}`" for label in labels),
            verb="is a float that changes" if len(labels) == 1 else "are floats that change",
            frame=frames[0].shown_name,
            values=shown,
            compiles=compiles,
            limit=", recompile limit hit" if limit else "",
            fix=fix,
        )
        notes = list(plan.why_not) if plan.why_not else [f"unproven: {d}" for d in plan.doubts]
        params: dict[str, Any] = {}
        if safety is not Safety.NONE:
            params = {
                "wrap": sorted({tuple(w.rhs) for w in plan.writes if w.rhs is not None}),
                "float64": plan.float64,
            }
            annotations = sorted({tuple(w.annotation) for w in plan.writes if w.annotation is not None})
            if annotations:
                params["annotations"] = annotations
            in_place = [w for w in plan.writes if w.rhs is None]
            if in_place:
                notes.append(f"{len(in_place)} in-place update(s) (`{in_place[0].code}`) now update the tensor")
            if safety is Safety.SAFE:
                notes.append(bit_identical_note(plan.float64))
        assert plan.location is not None
        return Finding(
            rule=self.id,
            file=plan.location.file,
            location=plan.location,
            message=message,
            safety=safety,
            params=params,
            evidence={
                "frames": [f"{f.name} ({f.file}:{f.first_line})" for f in frames],
                "compiles": compiles,
                "limit_hits": limit,
                "values": values[:10],
                "sources": sorted({s for a in plan.merged for s in a.sources}),
            },
            notes=notes,
            covers=[cover(f, sorted(a.sources), _KINDS) for a in plan.merged for f in a.frames],
            unsafe_because=UNPROVEN,
            tolerance={"why": "a 0-d tensor rounds where the float did not"}
            if plan.close and safety is not Safety.NONE
            else None,
        )

    def _per_file(self, finding: Finding, plan: "_Plan") -> list[Finding]:
        """One Finding per file the attribute is assigned in (set in `model.py`'s `__init__`,
        changed by `train.py`'s loop), made together or not at all (``params["together"]``):
        one file's edits alone would leave a float beside a tensor."""
        files = list(dict.fromkeys(w.file for w in plan.writes))
        if finding.safety is Safety.NONE or len(files) < 2:
            return [finding]
        out = []
        for file in files:
            mine = [w for w in plan.writes if w.file == file]
            part = copy.deepcopy(finding)
            part.file = file
            part.location = next((w.location for w in mine if w.rhs is not None), mine[0].location)
            part.params["wrap"] = sorted({tuple(w.rhs) for w in mine if w.rhs is not None})
            annotations = sorted({tuple(w.annotation) for w in mine if w.annotation is not None})
            part.params.pop("annotations", None)
            if annotations:
                part.params["annotations"] = annotations
            part.params["together"] = f"{self.id}:{plan.label}:{files[0]}:{plan.writes[0].location.line}"
            others = ", ".join(f for f in files if f != file)
            part.notes.append(f"made together with its assignments in {others}: a float beside a tensor would stay")
            out.append(part)
        return out

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        if "compile_call" in finding.params:
            return compile_keyword_edits(finding.file, finding.params, source, self.id)
        wrapped = wrap_edits(
            finding.file, finding.params["wrap"], finding.params["float64"], source, torch_name, self.id
        )
        return wrapped + [
            Edit(finding.file, start, end, f"{torch_name}.Tensor", self.id)
            for start, end in finding.params.get("annotations", [])
        ]


@dataclass
class _Write:
    file: str
    code: str  # the statement, one line
    location: Location
    rhs: list[int] | None  # the value's span; None: an in-place update (`+=`)
    annotation: list[int] | None = None  # the span of a `float` annotation, which becomes `torch.Tensor`


@dataclass
class _Plan:
    attribute: Counter
    label: str
    location: Location | None = None
    writes: list[_Write] = field(default_factory=list)
    why_not: list[str] = field(default_factory=list)
    doubts: list[str] = field(default_factory=list)
    float64: bool = False
    close: bool = False  # the results may be only close to the float's (assert_close, not bits)
    merged: list[Counter] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.merged, self.labels = [self.attribute], [self.label]

    def refuse(self, why: str | list[str], location: Location) -> None:
        self.why_not.extend([why] if isinstance(why, str) else why)
        self.location = location


def _torch_dropout_p(reason) -> bool:
    """A guard on the `p` torch's own dropout module reads (its first use in nn/modules/dropout.py)."""
    use = reason.first_use
    file = (use.file if use is not None else "").replace("\\", "/")
    return bool(reason.source) and reason.source.endswith(".p") and file.endswith("torch/nn/modules/dropout.py")


def _changing_floats(frame: Frame) -> list[tuple[str, list]]:
    """The attribute sources of ``frame`` that held a float whose value changed: named by a
    failed guard (torch's named one, or one the recorder found failing beside it), or recorded at
    the frame's compiles with more than one value."""
    found: dict[str, list] = {}
    # An nn.Dropout's `p`: RF008's (a ScheduledDropout), never a float of the user's class.
    dropout = {r.source for r in frame.value_reasons() if _torch_dropout_p(r)}
    for reason in frame.value_reasons():
        if reason.source in dropout:
            continue
        if reason.kind in _KINDS and reason.value_type == "float" and reason.source:
            values = found.setdefault(reason.source, [])
            if isinstance(reason.value, float) and reason.value not in values:
                values.append(reason.value)
    recorded: dict[str, list] = {}
    for compile_ in frame.compiles:
        for name, entry in compile_.inputs.items():
            if entry.get("type") == "float" and "." in name:
                values = recorded.setdefault(name, [])
                if entry.get("value") not in values:
                    values.append(entry.get("value"))
    for name, values in recorded.items():
        if name in dropout:
            continue
        if len(values) > 1 or name in found:
            found[name] = values + [v for v in found.get(name, []) if v not in values]
    return list(found.items())


def _writes(state: AttributeState, project: Project) -> tuple[list[_Write], list[str]]:
    """Every assignment and in-place update of the attribute in the profiled files whose object
    may be of its class, and what leaves the edit unproven."""
    attr, classes = state.counter.name, ClassIndex(project)
    writes: list[_Write] = []
    doubts: list[str] = []
    shared = False
    for file in state.files:
        source = project.source(file)
        assert source is not None, f"{file} is profiled and readable"
        annotated = [n for n in source.nodes(cst.AnnAssign) if n.value is not None]  # `self.margin: float = 0.1`
        for node in [*source.nodes(cst.Assign), *source.nodes(cst.AugAssign), *annotated]:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            ours = [t for t in targets if isinstance(t, cst.Attribute) and t.attr.value == attr]
            if not ours:
                continue
            known = [_holder_is(state, classes, source, file, t) for t in ours]
            if all(k is False for k in known):
                continue  # another class's attribute of the same name
            statement = source.parents.get(node, node)
            code = " ".join(source.code(statement).split())
            where = f"{file}:{source.positions[node].start.line}"
            if any(k is None for k in known):
                doubts.append(f"`{code}` at {where}: the source does not tie the object to `{state.label}`'s class")
            value = node.value if isinstance(node, (cst.Assign, cst.AnnAssign)) else None
            if value is not None and is_name(value, "None"):
                doubts.append(f"`{code}` at {where} sets it to None, left as it is (a recompile when it changes type)")
                continue
            if value is not None:
                shared = shared or (isinstance(node, cst.Assign) and len(node.targets) > 1)
                if not number_shaped(value, source, node) and not _constructed_with_numbers(
                    state, project, classes, source, node, value
                ):
                    doubts.append(f"`{code}` at {where}: the value may not be a number")
                rhs: list[int] | None = list(source.span(value))
            else:
                rhs = None
            pos = source.positions[node]
            write = _Write(file, code, Location(file=file, line=pos.start.line, col=pos.start.column), rhs)
            if isinstance(node, cst.AnnAssign) and source.code(node.annotation.annotation) == "float":
                write.annotation = list(source.span(node.annotation.annotation))  # now a tensor's
            writes.append(write)
    if shared and any(w.rhs is None for w in writes):
        doubts.append("an in-place update would change the tensor every object of a chained assignment shares")
    return writes, doubts


def _setattr_writes(attr: str, files: list[str], project: Project) -> list[str]:
    """``setattr(obj, name, value)`` calls in the profiled files that may write the attribute (its
    name, or a name the source does not spell): a write the fix does not see."""
    found = []
    for file in files:
        source = project.source(file)
        if source is None or "setattr" not in source.text:
            continue
        for call in source.nodes(cst.Call):
            if not is_name(call.func, "setattr") or len(call.args) < 2:
                continue
            name = call.args[1].value
            if isinstance(name, cst.SimpleString) and name.evaluated_value != attr:
                continue
            line = source.positions[call].start.line
            found.append(f"`{source.lines[line - 1].strip()}` at {file}:{line} may set it to a float again")
    return found


def _holder_is(
    state: AttributeState, classes: ClassIndex, source: SourceFile, file: str, target: cst.Attribute
) -> bool | None:
    """Is the object of ``target`` (``self.alpha``, ``G.alpha``) an instance of the attribute's
    class: True, False, or None (cannot tell)?"""
    if is_name(target.value, "self"):
        cls = next(
            (source.enclosing_class(a) for a in source.ancestors(target) if isinstance(a, cst.FunctionDef)), None
        )
        if cls is None:
            return None
        ref = ClassRef(file, source, cls)
        if state.lineage is None:  # the compiled method's class: `self` may be a subclass's
            return True if ref.node is state.cls else None
        return ref in state.lineage
    built = holder_class(classes, source, file, target.value)
    if built is None:
        return None
    return any(c.node is state.cls for c in classes.mro(built))


def _constructed_with_numbers(
    state: AttributeState,
    project: Project,
    classes: ClassIndex,
    source: SourceFile,
    node: cst.CSTNode,
    value: cst.BaseExpression,
) -> bool:
    """``self.margin = margin`` in the class's ``__init__``, where ``margin`` is a parameter with a
    number default and every construction of the class in the profiled files passes a number
    for it, or nothing."""
    init = next((a for a in source.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
    if init is None or init.name.value != "__init__" or source.enclosing_class(init) is not state.cls:
        return False
    if not isinstance(value, cst.Name):
        return False
    params = [*init.params.posonly_params, *init.params.params]
    param = next((p for p in [*params, *init.params.kwonly_params] if p.name.value == value.value), None)
    if param is None or param.default is None or not number_shaped(param.default, source, init):
        return False
    position = params.index(param) - 1 if param in params else None  # `self` is not passed
    calls = 0
    for file in state.files:
        other = project.source(file)
        assert other is not None, f"{file} is profiled and readable"
        for call in other.nodes(cst.Call):
            built = classes.resolve(file, call.func)
            if built is None or not any(c.node is state.cls for c in classes.mro(built)):
                continue
            calls += 1
            if any(a.star for a in call.args):
                return False
            passed = next((a for a in call.args if a.keyword and a.keyword.value == param.name.value), None)
            positional = [a for a in call.args if a.keyword is None]
            if passed is None and position is not None and position < len(positional):
                passed = positional[position]
            if passed is not None and not number_shaped(passed.value, other, call):
                return False
    return calls > 0


def _reads(
    state: AttributeState, frame: Frame, project: Project, compiled: list[Span], output_fields: bool
) -> tuple[list[Use], list[Use], list[Use]]:
    """The attribute's reads: (uses that must be tensor arithmetic, format strings outside
    compiled code, which print a float64 0-d tensor as they printed the float, and the uses that
    block a tensor)."""
    uses = state.reads(frame, project, output_fields=output_fields)
    formats = [u for u in uses if u.kind == "format" and not _inside(u, compiled)]
    uses = [u for u in uses if u not in formats]
    return uses, formats, distinct(u for u in uses if u.verdict != TENSOR)


def _compiled_spans(state: AttributeState, frames: list[Frame], project: Project) -> list[Span]:
    """Each compiled frame's function and the attribute's class (whose methods its compiled forward
    calls): where the recorded graphs show what the attribute meets, and where formatting a tensor
    would break the graph."""
    pos = state.source.positions[state.cls]
    return [(state.file, pos.start.line, pos.end.line, state.cls.name.value), *compiled_function_spans(frames, project)]


def _inside(use: Use, spans: list[Span]) -> bool:
    return inside(use.file, use.line, spans) is not None


def _merged(plans) -> list[_Plan]:
    """One plan per set of attributes that share an assignment (`G.alpha = D.alpha = alpha`):
    their edits are one edit."""
    result: list[_Plan] = []
    for plan in plans:
        spans = {tuple(w.rhs) for w in plan.writes if w.rhs is not None}
        other = next((r for r in result if spans & {tuple(w.rhs) for w in r.writes if w.rhs is not None}), None)
        if other is None:
            result.append(plan)
            continue
        other.merged.append(plan.attribute)
        other.labels.append(plan.label)
        other.writes.extend(w for w in plan.writes if w not in other.writes)
        other.doubts.extend(d for d in plan.doubts if d not in other.doubts)
        other.why_not.extend(w for w in plan.why_not if w not in other.why_not)
        other.close = other.close or plan.close
        if plan.float64 != other.float64 and not (plan.why_not or other.why_not):
            other.float64 = True
            other.doubts.append("attributes sharing one assignment want different dtypes; float64 for both")
    return result


def _short(value: object) -> str:
    return repr(round(value, 4)) if isinstance(value, float) else repr(value)


RULE = FloatAttribute()
