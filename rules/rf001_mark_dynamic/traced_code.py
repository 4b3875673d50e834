"""Where torch traces the program's own code: the functions of the run's compiled frames.

A mark is a call torch forbids in code it traces (`maybe_mark_dynamic` inside a compiled
function: `AssertionError: Attempt to trace forbidden callable`, measured on torch 2.13, a trial's
`@torch.compile def compute_loss(model, ids, n): ids = ids[:, :n]; model(ids)`, where a graph
break in the model made its `forward` a frame of its own, called from inside `compute_loss`). So
a call inside such a function gets no mark before it."""

from __future__ import annotations

from recompile_fix.analysis.compiled_spans import Span, compiled_function_spans, inside
from recompile_fix.analysis.project import Project
from recompile_fix.profile.model import Location, Profile

__all__ = ["traced_around", "traced_spans"]


def traced_spans(profile: Profile, project: Project) -> list[Span]:
    """The project's functions the run compiled."""
    return compiled_function_spans(profile.frames, project)


def traced_around(spans: list[Span], site: Location) -> str | None:
    """Why no mark goes before the call at ``site``: it is inside a compiled function; or None.
    (A call on a def's own first line is the decorator's, outside the body.)"""
    name = inside(site.file, site.line, [(f, start + 1, end, n) for f, start, end, n in spans])
    return f"the call is inside `{name}`, which torch compiles: no mark can run in traced code" if name else None
