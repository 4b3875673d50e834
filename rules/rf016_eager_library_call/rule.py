"""RF016 eager-library-call: library code a compiled function calls recompiles for every new value
of a number it reads; the call runs it eagerly (``torch.compiler.disable``)."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_targets import library_frame
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Compile, Frame, Location, Profile, is_library_path
from recompile_fix.profile.resume import function_of

__all__ = ["RULE", "EagerLibraryCall"]

COMPILER_DISABLE = TorchApi(
    "torch.compiler.disable",
    (2, 1),
    "torch/compiler/__init__.py (2.1.0); measured 2.13.0 called inside a compiled function: a graph "
    "break, the callee runs eagerly and compiles nothing",
)
_VALUE_KINDS = ("scalar_value", "module_attribute", "global_value")
# A module's call: run eagerly, the model itself would no longer be compiled.
_MODULE_CALLS = {"forward", "_call_impl", "_wrapped_call_impl", "__call__"}


class EagerLibraryCall(Rule):
    """
    ## What it does
    Finds a call in a compiled function into library code (a diffusers scheduler's `step`) whose
    frames torch compiles again for every new value of a number they read (a timestep, a step
    index), and runs that call eagerly: `torch.compiler.disable(scheduler.step)(...)`.

    ## Why is this bad?
    The library code breaks the graph (data-dependent branching), so torch compiles it as frames
    of its own, each guarded on the numbers it reads (`timestep.item() == 875`,
    `self._step_index == 3`): every denoising step compiles them again, up to the recompile
    limit, and none of those graphs is used twice. Run eagerly, the library code compiles
    nothing; the rest of the compiled function (the model) is compiled as before (torch 2.13, a
    DDIM sampling step with a tiny UNet: 34 -> 1 compiles, the latents bit for bit).

    ## Example
    ```python
    @torch.compile
    def denoise_step(latents, t):
        noise_pred = unet(latents, t).sample
        return scheduler.step(noise_pred, t, latents).prev_sample
    ```
    Use instead:
    ```python
    @torch.compile
    def denoise_step(latents, t):
        noise_pred = unet(latents, t).sample
        return torch.compiler.disable(scheduler.step)(noise_pred, t, latents).prev_sample
    ```

    ## Fix safety
    Safe where every compile it removes ran the eager backend: the library code runs the same
    ops eagerly. Under another backend unproven (`fix` keeps it where a run shows fewer compiles
    and the same outputs): the library code's small graphs were compiled by that backend, whose
    kernels may round otherwise. No finding for a call of a module (a model's `forward`: running
    it eagerly gives up compiling the model), of torch's own code, or where the library frames
    are reached from more than one line; no fix where the call is not found on the recorded line.

    ## Profile evidence
    Frames in an installed package's files that recompile for value guards
    (`scalar_value`, `module_attribute`, `global_value`), whose compiles' stacks end in the user's
    code at one call inside a compiled function of the user's (the call's column span), and the
    backend each compile ran.
    """

    id = "RF016"
    name = "eager-library-call"
    message = (
        "`{callee}` in compiled `{frame}` runs library code that compiles again for each new value of "
        "{sources} ({recompiles} recompiles in {frames}): {fix}"
    )
    consumes = _VALUE_KINDS
    triggers = ("compile",)
    emits = (COMPILER_DISABLE,)
    verify_allows = ("graph_breaks", "resume_frames")
    finding_only = False
    examples = (
        Example(
            before="    return scheduler.step(noise_pred, t, latents).prev_sample\n",
            after="    return torch.compiler.disable(scheduler.step)(noise_pred, t, latents).prev_sample\n",
            golden="RF016/scheduler_step",
        ),
        Example(
            before='step = torch.compile(scheduler.step, backend="eager")\n',
            after=None,
            golden="RF016/compiled_scheduler_step",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        if not COMPILER_DISABLE.runs_on(profile.torch_release):
            return []
        compiled = {(f.file, function_of(f.name)) for f in profile.frames if not is_library_path(f.file)}
        # The user's call each recompiling library frame is reached through: its span, the call,
        # the library function it calls, and the frames reached through it.
        by_site: dict[tuple[Any, ...], tuple[Location, str, list[Frame]]] = {}
        for frame in profile.frames:
            if not is_library_path(frame.file) or _is_torch(frame.file) or frame.recompiles == 0:
                continue
            if not any(r.kind in _VALUE_KINDS for c in frame.compiles for r in c.value_reasons()):
                continue
            reached = [_site_of(frame, c) for c in frame.compiles]
            if None in reached or len({r[0] for r in reached if r is not None}) != 1:
                continue  # reached from several lines (or none of the user's): no one call to edit
            key, site, callee = reached[0]  # type: ignore[misc]
            if (site.file, function_of(site.function)) not in compiled or function_of(callee) in _MODULE_CALLS:
                continue
            by_site.setdefault(key, (site, callee, []))[2].append(frame)
        findings = [self._finding(project, site, callee, frames) for site, callee, frames in by_site.values()]
        return [f for f in findings if f is not None]

    def _finding(self, project: Project, site: Location, callee: str, frames: list[Frame]) -> Finding | None:
        source = project.source(site.file)
        call = source.call_at(site.line, site.col, site.end_line, site.end_col) if source is not None else None
        if source is None or call is None or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None  # not found, or a call of a call (already `torch.compiler.disable(f)(...)`)
        reasons = [r for f in frames for c in f.compiles for r in c.value_reasons() if r.kind in _VALUE_KINDS]
        guarded = sorted({r.source for r in reasons if r.source})
        shown = ", ".join(f"`{s}`" for s in guarded[:3]) + (", ..." if len(guarded) > 3 else "")
        user_frame = function_of(site.function) or "?"
        callee_text = source.code(call.func)
        backends = {c.backend for f in frames for c in f.compiles}
        eager = backends == {"eager"}
        fix = "run it eagerly with `torch.compiler.disable`"
        message = self.message.format(
            callee=callee_text,
            frame=user_frame,
            sources=shown,
            recompiles=sum(f.recompiles for f in frames),
            frames=f"{len(frames)} frame{'s' if len(frames) > 1 else ''}",
            fix=fix,
        )
        evidence = frame_evidence(
            frames[0], reasons, call_site=f"{site.file}:{site.line}", library_frames=[f.label for f in frames]
        )
        covers = [
            cover(f, sorted({r.source for c in f.compiles for r in c.value_reasons() if r.source})) for f in frames
        ]
        first = frames[0].compiles[-1]
        where = library_frame(first.library_frames[0]) if first.library_frames else f"`{callee}`"
        notes = [
            f"`{callee_text}` reaches library code ({where}) that torch compiles as frames of their own (it breaks "
            f"the graph), each guarded on {shown}: a compile per new value, none used twice. Run eagerly, it "
            f"compiles nothing; the rest of `{user_frame}` is compiled as before"
        ]
        if not eager:
            notes.append(
                f"unproven: the library code ran compiled by {', '.join(sorted(str(b) for b in backends))} "
                "and runs eagerly now, whose kernels may round otherwise: `fix` keeps it where a run shows fewer "
                "compiles and the same outputs"
            )
        pos = source.positions[call.func]
        return Finding(
            rule=self.id,
            file=site.file,
            location=source.location_of(call, site.file, site.function),
            message=message,
            safety=Safety.SAFE if eager else Safety.UNSAFE,
            params={
                "callee": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
                "callee_text": callee_text,
            },
            evidence=evidence,
            notes=notes,
            covers=covers,
            unsafe_because=UNPROVEN,
        )

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        line, col, end_line, end_col = finding.params["callee"]
        start, end = source.offset(line, col), source.offset(end_line, end_col)
        text = finding.params["callee_text"]
        if source.text[start:end] != text:
            raise ValueError(f"line {line} no longer calls `{text}` where the run recorded it")
        return [Edit(finding.file, start, end, f"{torch_name}.compiler.disable({text})", self.id)]

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """The call's callee is wrapped already (a Profile recorded before the edit)."""
        line = finding.params["callee"][0]
        text = finding.params["callee_text"]
        wrapped = re.compile(r"\w+\.(?:compiler|_dynamo)\.disable\(\s*" + re.escape(text) + r"\s*\)")
        if line <= len(source.lines) and wrapped.search(source.lines[line - 1]):
            return f"line {line}: `{text}` runs eagerly"
        return super().already_present(finding, source)


def _site_of(frame: Frame, compile_: Compile) -> tuple[tuple[Any, ...], Location, str] | None:
    """The user's call into the library code that compiled (the last user line on the stack:
    its span, itself) and the library function it called, or None where no user line made it."""
    site = compile_.user_call_site
    if site is None or site.col is None:
        return None
    library = compile_.library_frames
    callee = (library[0].function if library else frame.name) or "?"
    return (site.file, site.line, site.col, site.end_line, site.end_col), site, callee


def _is_torch(path: str) -> bool:
    normal = path.replace("\\", "/")
    return "/torch/" in normal or normal.startswith("torch/")


RULE = EagerLibraryCall()
