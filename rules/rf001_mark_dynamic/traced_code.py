"""Where torch traces the program's own code: the functions of the run's compiled frames.

A mark is a call torch forbids in code it traces (`maybe_mark_dynamic` inside a compiled
function: `AssertionError: Attempt to trace forbidden callable`, measured on torch 2.13, a trial's
`@torch.compile def compute_loss(model, ids, n): ids = ids[:, :n]; model(ids)`, where a graph
break in the model made its `forward` a frame of its own, called from inside `compute_loss`). So
a call inside such a function gets no mark before it."""

from __future__ import annotations

import os

from recompile_fix.analysis.project import Project
from recompile_fix.profile.model import Location, Profile
from recompile_fix.profile.resume import function_of, is_resume

__all__ = ["TracedSpan", "traced_spans", "traced_around"]

TracedSpan = tuple[str, int, int, str]  # (file, first line, last line, function name)


def traced_spans(profile: Profile, project: Project) -> list[TracedSpan]:
    """The project's functions the run compiled (a resume function stands for its own function)."""
    spans: list[TracedSpan] = []
    for frame in profile.frames:
        if os.path.isabs(frame.file) or is_resume(frame.name):
            continue
        source = project.source(frame.file)
        func = source.function_def(frame.first_line, function_of(frame.name) or frame.name) if source else None
        if source is not None and func is not None:
            pos = source.positions[func]
            spans.append((frame.file, pos.start.line, pos.end.line, func.name.value))
    return spans


def traced_around(spans: list[TracedSpan], site: Location) -> str | None:
    """Why no mark goes before the call at ``site``: it is inside a compiled function; or None."""
    for file, start, end, name in spans:
        if file == site.file and start < site.line <= end:
            return f"the call is inside `{name}`, which torch compiles: no mark can run in traced code"
    return None
