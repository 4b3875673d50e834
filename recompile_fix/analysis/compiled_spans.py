"""The program's functions the run compiled, as line spans: where a use of a value is read by
compiled code (RF014, RF015: what the graphs recorded covers it), and where code runs traced
(RF001: no mark there)."""

from __future__ import annotations

import os

from recompile_fix.analysis.project import Project
from recompile_fix.profile.model import Frame
from recompile_fix.profile.resume import function_of, is_resume

__all__ = ["Span", "compiled_function_spans", "inside"]

Span = tuple[str, int, int, str]  # (file, first line, last line, function name)


def compiled_function_spans(frames: list[Frame], project: Project) -> list[Span]:
    """The spans of the project's functions ``frames`` compiled (a resume function stands for its
    own function, whose frame the run has too)."""
    spans: list[Span] = []
    for frame in frames:
        if os.path.isabs(frame.file) or is_resume(frame.name):
            continue
        source = project.source(frame.file)
        func = source.function_def(frame.first_line, function_of(frame.name) or frame.name) if source else None
        if source is not None and func is not None:
            pos = source.positions[func]
            spans.append((frame.file, pos.start.line, pos.end.line, func.name.value))
    return spans


def inside(file: str, line: int, spans: list[Span]) -> str | None:
    """The function of ``spans`` whose lines hold ``file:line``, or None."""
    return next((name for f, start, end, name in spans if f == file and start <= line <= end), None)
