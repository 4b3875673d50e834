"""Where a line setting an attribute on a model goes when the model is called inside a compiled
function (RF013's `loss_type`, RF010's `config.problem_type`).

People compile the step, not the model: `@torch.compile def compute_loss(model, ids): return
model(input_ids=ids, labels=ids).loss`. transformers' `loss_function` warning then breaks the
graph of every frame of the model torch compiles from inside that function (a trial's GPT-2
curriculum: 7 frames recompiling, 14 compiles). The attribute goes on the model object itself,
right after the statement that builds it, in the scope that calls the compiled function: the
name the call passes for the function's parameter, or the global the function reads."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.call_site_code import find_compile_call, root_name
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import Location, Profile

__all__ = ["ModelLine", "model_line"]


@dataclass
class ModelLine:
    target: str  # the model's name where it is built (`model`)
    built: Location  # the statement that builds it
    after: int  # the line the attribute's line goes before (the one after that statement)


def model_line(profile: Profile, project: Project, path: str, source: SourceFile, call: cst.Call) -> ModelLine | None:
    """The model ``call`` (``model(...)`` in ``path``, inside a function the run compiled) calls,
    named where it is built, and where a line setting an attribute on it goes; None where it
    cannot be told."""
    func = next((a for a in source.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
    root = root_name(call.func)
    if func is None or root is None or not isinstance(call.func, cst.Name):
        return None
    if find_compile_call(project, path, {func.name.value}, dynamic_true=True) is None:
        return None
    params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    frame = next((f for f in profile.frames if f.file == path and f.name == func.name.value), None)
    outer_site = next((s for s, _ in frame.call_sites() if s is not None and s.file == path), None) if frame else None
    outer = call_at_site(source, outer_site, frame, project.source) if outer_site is not None and frame else None
    if outer is None:
        return None
    target = root
    if root in params:  # the name the call passes for the parameter
        index = params.index(root)
        positional = [a for a in outer.args if a.keyword is None and not a.star]
        passed = next((a for a in outer.args if a.keyword is not None and a.keyword.value == root), None)
        arg = passed or (positional[index] if index < len(positional) else None)
        if arg is None or not isinstance(arg.value, cst.Name):
            return None
        target = arg.value.value
    built = _last_assignment(source, outer, target)
    if built is None:
        return None
    start, end = source.positions[built].start, source.positions[built].end
    return ModelLine(target, Location(path, start.line, col=start.column), end.line + 1)


def _last_assignment(source: SourceFile, outer: cst.Call, name: str) -> cst.SimpleStatementLine | None:
    """The last ``name = ...`` statement before ``outer``'s statement in the bodies around it, the
    innermost first, out to its function's body or the module's (a loop around the call, a model
    built above the loop)."""
    node: cst.CSTNode = outer
    while True:
        statement, body = node, None
        for parent in source.ancestors(node):
            if isinstance(parent, (cst.Module, cst.IndentedBlock)):
                body = parent
                break
            statement = parent
        if body is None:
            return None
        line = source.positions[statement].start.line
        found = None
        for item in body.body:
            if source.positions[item].start.line >= line:
                break
            if isinstance(item, cst.SimpleStatementLine) and any(
                isinstance(small, cst.Assign)
                and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
                for small in item.body
            ):
                found = item
        if found is not None:
            return found
        around = source.parents.get(body)
        if isinstance(body, cst.Module) or around is None or isinstance(around, cst.FunctionDef):
            return None
        node = around
