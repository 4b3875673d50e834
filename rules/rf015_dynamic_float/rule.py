"""RF015 dynamic-float: a module-level float the compiled code reads changes between calls; it is
held in a 0-d tensor (a graph input), or, where a tensor would change what the program does, the
compile call gets ``dynamic=True`` so that torch traces it as a float input from the first compile."""

from __future__ import annotations

import os
import re

from recompile_fix.analysis.compile_calls import compile_call_of
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.compile_keyword import compile_keyword_edits, dynamic_true_at, one_per_compile_call
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.zero_d_tensor import bit_identical_note, wrap_edits
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import DYNAMIC_FLOATS, TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Profile, Reason
from recompile_fix.profile.resume import function_of
from recompile_fix.rules.rf015_dynamic_float.tensor_global import TensorGlobal, tensor_global

__all__ = ["RULE", "DynamicFloat"]

_GLOBAL = re.compile(r"""^G\[(['"])(?P<name>[A-Za-z_]\w*)\1\]$""")


class DynamicFloat(Rule):
    """
    ## What it does
    Finds a module-level `float` (a margin, a loss weight, a temperature) that the program changes
    between calls of a compiled function which reads it, and holds it in a 0-d tensor: every
    assignment `MARGIN = value` becomes `MARGIN = torch.tensor(value)`. Where a tensor would
    change what the program does, it compiles that function with `dynamic=True` instead:
    `@torch.compile(dynamic=True)`, or `dynamic=True` added to its `torch.compile(...)` call.

    ## Why is this bad?
    torch guards a global float the graph reads on its value (`G['MARGIN'] == 0.2`) and compiles
    the function again when it changes; under `dynamic=None` only that once (the second compile
    traces it as a float input), under `dynamic=False` once per value until the recompile limit.
    PGO's second run (`TORCH_COMPILE_JOB_ID`) starts from the float input. A global 0-d tensor is
    a graph input guarded on its dtype and shape, not its value: one compile on the first run,
    on every machine, under any `dynamic` and backend (torch 2.13, a triplet loss whose margin
    rises each epoch: 2 -> 1 compiles, the losses bit for bit, eager and inductor).

    ## Example
    ```python
    MARGIN = 0.2

    @torch.compile
    def triplet_loss(a, p, n):
        return F.relu((a - p).pow(2).sum(-1) - (a - n).pow(2).sum(-1) + MARGIN).mean()

    for epoch in range(4):
        MARGIN = 0.2 + 0.1 * epoch
        triplet_loss(a, p, n)
    ```
    Use instead:
    ```python
    MARGIN = torch.tensor(0.2)
    ...
    for epoch in range(4):
        MARGIN = torch.tensor(0.2 + 0.1 * epoch)
        triplet_loss(a, p, n)
    ```

    ## Fix safety
    The 0-d tensor is RF014's for an attribute, made for a global: every read of it in its file
    must be tensor arithmetic (the analysis RF002 uses); a read in a Python branch, `range()`,
    `math.*`, a `print` (which would show `tensor(0.2000)`; an f-string formats it as the float)
    or a call whose source cannot be read makes no tensor, and the finding says which. Its dtype
    is the one that computes as the float did beside what the run recorded it meeting
    (`float32` met directly by float32 tensors; float64 where Python arithmetic on it comes
    first, `1 - MARGIN`, or it is formatted); where the run did not record that, the tensor is
    unproven, and `fix` keeps it only with the same outputs. So it is where another profiled
    file names the global (it may read or set it), or a value assigned may not be a number. Every
    binding must be a plain assignment: `+=` (which would update a tensor that other names may
    hold), a loop target, `with ... as`, `:=`, `del`, a chained `A = B = value`, or an assignment
    before `import torch` make no tensor.

    Where no tensor is made, `dynamic=True` remains. It is unsafe, unproven: it also traces the
    sizes of every tensor the function gets as dynamic (kernels that cannot specialise on a
    size), and a backend may specialise the float again (inductor's tensorify pass turns some
    floats back into constants), so `fix` keeps it only where a run shows fewer compiles and the
    same outputs. Where the call compiles more than the function (a whole model) or says
    `dynamic=False`, it is a trade-off (`--unsafe-fixes`). Where the tensor is unproven,
    `dynamic=True` is its fallback, which `fix` tries where the tensor is not kept. No
    `dynamic=True` under CUDA graphs (`mode="reduce-overhead"`: a graph per value), where the
    compile call is not found, on torch older than 2.6 (floats specialised by default), or for a
    library's frame. A global int is RF006's (`torch.compiler.config.dynamic_sources` names it
    alone).

    ## Profile evidence
    A value guard on a global that failed, `G['MARGIN'] == 0.2` (kind `global_value`, the value a
    float), and the values it had at each compile. The compile call is the function's decorator
    or `torch.compile(<function>)` in its file, else the compile call of what the user line
    nearest the frame on its compiles' stacks calls.
    """

    id = "RF015"
    name = "dynamic-float"
    message = (
        "`{name}` is a module-level float that changes between calls of compiled `{frame}` "
        "({values}; {compiles} compiles): {fix}"
    )
    consumes = ("global_value",)
    triggers = ("compile",)
    emits = (TorchApi("torch.tensor", None, "every release"), DYNAMIC_FLOATS)
    finding_only = False
    examples = (
        Example(
            before=(
                "MARGIN = 0.2\n"
                "\n"
                "\n"
                '@torch.compile(backend="eager")\n'
                "def triplet_loss(anchor, positive, negative):\n"
                "    closer = (anchor - positive).pow(2).sum(-1)\n"
                "    farther = (anchor - negative).pow(2).sum(-1)\n"
                "    return F.relu(closer - farther + MARGIN).mean()\n"
                "\n"
                "\n"
                "torch.manual_seed(0)\n"
                "embed = torch.nn.Linear(16, 8)\n"
                "optimizer = torch.optim.SGD(embed.parameters(), lr=0.1)\n"
                "data = torch.randn(3, 32, 16)\n"
                "for epoch in range(4):\n"
                "    MARGIN = 0.2 + 0.1 * epoch\n"
            ),
            after=(
                "MARGIN = torch.tensor(0.2)\n"
                "\n"
                "\n"
                '@torch.compile(backend="eager")\n'
                "def triplet_loss(anchor, positive, negative):\n"
                "    closer = (anchor - positive).pow(2).sum(-1)\n"
                "    farther = (anchor - negative).pow(2).sum(-1)\n"
                "    return F.relu(closer - farther + MARGIN).mean()\n"
                "\n"
                "\n"
                "torch.manual_seed(0)\n"
                "embed = torch.nn.Linear(16, 8)\n"
                "optimizer = torch.optim.SGD(embed.parameters(), lr=0.1)\n"
                "data = torch.randn(3, 32, 16)\n"
                "for epoch in range(4):\n"
                "    MARGIN = torch.tensor(0.2 + 0.1 * epoch)\n"
            ),
            golden="RF015/global_margin",
        ),
        Example(
            before='@torch.compile(backend="eager")\ndef triplet_loss(anchor, positive, negative):\n',
            after='@torch.compile(backend="eager", dynamic=True)\ndef triplet_loss(anchor, positive, negative):\n',
            golden="RF015/dynamic_float",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        # Each global of a file, with every frame that recompiled on it: one tensor serves them all.
        globals_: dict[tuple[str, str], list[tuple[Frame, list[Reason]]]] = {}
        for frame in profile.frames:
            if os.path.isabs(frame.file):
                continue  # a library's frame: its compile call is not the user's to edit
            floats: dict[str, list[Reason]] = {}
            for reason in frame.value_reasons():
                match = _GLOBAL.match(reason.source or "")
                if reason.kind == "global_value" and reason.value_type == "float" and match:
                    floats.setdefault(match.group("name"), []).append(reason)
            for name, reasons in floats.items():
                globals_.setdefault((frame.file, name), []).append((frame, reasons))
        files = [p for p in profile.sources if not os.path.isabs(p) and project.source(p) is not None]
        findings: list[Finding] = []
        dynamic_of: dict[int, tuple[Frame, list[Finding]]] = {}  # per frame: one `dynamic=True` for its floats
        for (_, name), readers in globals_.items():
            tensor = tensor_global(name, [frame for frame, _ in readers], files, project)
            if tensor.offered:
                findings.append(self._tensor_finding(name, tensor, readers))
            if tensor.offered and not tensor.doubts:
                continue
            for frame, reasons in readers:
                dynamic = self._finding(frame, name, reasons, profile, project)
                if tensor.offered and dynamic.fixable:
                    dynamic.fallback = True
                    dynamic.notes.append("tried where the 0-d tensor is not kept")
                elif tensor.refused:
                    dynamic.notes.append(f"no 0-d tensor: {tensor.refused[0]}")
                dynamic_of.setdefault(id(frame), (frame, []))[1].append(dynamic)
        for frame, each in dynamic_of.values():
            findings.extend(one_per_compile_call(each, function_of(frame.name) or frame.name))
        return findings

    def _tensor_finding(self, name: str, tensor: TensorGlobal, readers: list[tuple[Frame, list[Reason]]]) -> Finding:
        frame, reasons = readers[0]
        values = list(dict.fromkeys(r.value for _, rs in readers for r in rs))
        message = self.message.format(
            name=name,
            frame=function_of(frame.name) or frame.name,
            values=", ".join(repr(v) for v in values[:3]) + (", ..." if len(values) > 3 else ""),
            compiles=sum(f.compile_count for f, _ in readers),
            fix="assign it as a 0-d tensor",
        )
        safety = Safety.UNSAFE if tensor.doubts else Safety.SAFE
        notes = [f"unproven: {d}" for d in tensor.doubts] or [bit_identical_note(tensor.float64)]
        notes.extend(tensor.notes)
        assert tensor.location is not None, "an offered tensor has its first assignment"
        return Finding(
            rule=self.id,
            file=tensor.location.file,
            location=tensor.location,
            message=message,
            safety=safety,
            evidence=frame_evidence(frame, [r for _, rs in readers for r in rs], values=values[:10]),
            notes=notes,
            covers=[cover(f, sorted({r.source for r in rs if r.source}), self.consumes) for f, rs in readers],
            params={"wrap": sorted(list(span) for span in tensor.wrap), "float64": tensor.float64},
            unsafe_because=UNPROVEN,
            tolerance={"why": "a 0-d tensor rounds where the float did not"}
            if tensor.close and tensor.doubts
            else None,
        )

    def _finding(self, frame: Frame, name: str, reasons: list[Reason], profile: Profile, project: Project) -> Finding:
        values = list(dict.fromkeys(r.value for r in reasons))
        shown = ", ".join(repr(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
        function_name = function_of(frame.name) or frame.name
        message = self.message.format(
            name=name,
            frame=function_name,
            values=shown,
            compiles=frame.compile_count,
            fix=f"compile `{function_name}` with `dynamic=True`",
        )
        evidence = frame_evidence(frame, reasons, values=values[:10])
        covers = [cover(frame, sorted({r.source for r in reasons if r.source}), self.consumes)]
        site = next((loc for c in frame.compiles for loc in c.stack if not os.path.isabs(loc.file)), None)

        def no_fix(why: str) -> Finding:
            location = reasons[0].first_use or site
            assert location is not None, "a recompiled frame of the project's has a user line on its stack"
            return Finding(
                rule=self.id,
                file=location.file,
                location=location,
                message=message.rsplit(": ", 1)[0] + ": it stays a Python float",
                safety=Safety.NONE,
                evidence=evidence,
                notes=[why],
                covers=covers,
            )

        if not DYNAMIC_FLOATS.runs_on(profile.torch_release):
            return no_fix(f"torch {profile.torch_version} specialises every float: `dynamic=True` would not help")
        call = compile_call_of(project, frame, function_name)
        if call is None:
            return no_fix(f"no `torch.compile` call of `{function_name}` found to add `dynamic=True` to")
        if call.cuda_graphs:
            return no_fix("the call runs CUDA graphs, which record a graph per value of the float")
        traced = f"with `dynamic=True` torch traces `{name}` as a float input from the first compile"
        caveat = ", and a backend may specialise the float again"
        notes, params, trade_off = dynamic_true_at(call, traced, function_name, caveat)
        params["names"] = [name]
        return Finding(
            rule=self.id,
            file=call.file,
            location=call.source.location_of(call.node, call.file),
            message=message,
            safety=Safety.UNSAFE,
            evidence=evidence,
            notes=notes,
            covers=covers,
            params=params,
            unsafe_because="trade-off" if trade_off else UNPROVEN,
        )

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        if "wrap" not in finding.params:
            return compile_keyword_edits(finding.file, finding.params, source, self.id)
        return wrap_edits(finding.file, finding.params["wrap"], finding.params["float64"], source, torch_name, self.id)

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """The compile call says ``dynamic=True`` already (a Profile recorded before the edit)."""
        if not finding.params.get("present"):
            return None
        return f"line {finding.params['compile_call'][0]}: `dynamic=True`"


RULE = DynamicFloat()
