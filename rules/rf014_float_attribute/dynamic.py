"""RF014's other fix: `dynamic=True` at the compile call of the module that reads the float, where
the 0-d tensor is unsafe (it may round: a distillation loss's `alpha * soft`, 1.9e-9 off). With
`dynamic=True` torch traces the attribute as a float input from the first compile; the code keeps
its Python float, so the arithmetic is the float's. Where the code reads it as a Python number (a
branch: `if self.training and self.cond_drop_prob > 0`), no 0-d tensor can take its place and
`dynamic=True` is the candidate a run proves: torch may guard a symbolic float's branch on its
outcome (a trial's classifier-free guidance dropout annealed to 0: 3 -> 2, bit for bit) or on its
value all the same, so it makes no graph break moot (RF008's drop path run eagerly stays offered). A trial's distillation loss (`torch.compile(kd_loss)`, temperature and
alpha annealed): 3 -> 2 compiles, the checksum bit for bit, where the tool had offered only the
0-d tensors, which `fix` dropped."""

from __future__ import annotations

from recompile_fix.analysis.compile_calls import compile_call_of
from recompile_fix.analysis.project import Project
from recompile_fix.edits.compile_keyword import dynamic_true_finding
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.releases import DYNAMIC_FLOATS
from recompile_fix.profile.model import Frame
from recompile_fix.profile.resume import function_of

__all__ = ["NOT_A_TENSOR", "dynamic_compile"]

NOT_A_TENSOR = "not a tensor: "  # how RF014 says the code reads the float as a Python number


def dynamic_compile(
    finding: Finding, frame: Frame, labels: list[str], project: Project, release: tuple[int, int] | None
) -> Finding | None:
    """``dynamic=True`` at the compile call of ``frame`` (the one user frame that reads the float(s)): the
    fallback of an unsafe 0-d tensor, or, where the code reads it as a Python number, the
    candidate a run proves (both unproven: `dynamic=True` also makes the frame's tensor sizes
    dynamic, and a backend may specialise the float again). None where the 0-d tensor is safe,
    refused for another reason, or no call is found."""
    refused = finding.safety is Safety.NONE
    if finding.safety is Safety.SAFE or (refused and not all(n.startswith(NOT_A_TENSOR) for n in finding.notes)):
        return None
    if not DYNAMIC_FLOATS.runs_on(release):
        return None
    function_name = function_of(frame.name) or frame.name
    call = compile_call_of(project, frame, function_name)
    if call is None or call.cuda_graphs:
        return None
    names = " and ".join(f"`{label}`" for label in labels)
    traced = f"with `dynamic=True` torch traces {names} as a float input from the first compile"
    why = (
        "the code reads it as a Python number, which no 0-d tensor can be: whether torch keeps it a float "
        "input there, and the branch's outcome its only guard, is for a run to show"
        if refused
        else "the 0-d tensor is unsafe here (its notes say why); a float traced as an input computes as before"
    )
    caveat = ", and a backend may specialise it again"
    both = (frame.shown_name, function_name)
    dynamic = dynamic_true_finding(finding, call, both, traced, [why, *(finding.notes if refused else [])], caveat)
    dynamic.fallback = not refused
    if not refused:
        dynamic.notes.append("tried where the 0-d tensor is not kept")
    if refused:  # torch may guard it all the same: no graph break is made moot by it
        dynamic.params["may_stay_guarded"] = True
    dynamic.params["names"] = labels
    return dynamic
