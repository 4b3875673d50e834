"""torch's names for the code after a graph break: ``torch_dynamo_resume_in_<function>_at_<line>``
(``torch/_dynamo/resume_execution.py``; a break inside such a piece nests the name). One reading
of them for the trace reader, the rules and `verify`. Standard library only."""

from __future__ import annotations

import re

__all__ = ["PREFIX", "function_of", "is_resume", "parse_resume", "resumed_function", "without_line"]

PREFIX = "torch_dynamo_resume_in_"
_NAME = re.compile(r"^torch_dynamo_resume_in_(?P<function>.+)_at_(?P<line>\d+)$")


def is_resume(name: str | None) -> bool:
    """Is this the name of a piece torch cut from a function at a graph break?"""
    return name is not None and name.startswith(PREFIX)


def parse_resume(name: str | None) -> tuple[str, int] | None:
    """(the function the piece was cut from, the line it resumes at), or None for any other name."""
    match = _NAME.match(name or "")
    return (match.group("function"), int(match.group("line"))) if match else None


def resumed_function(name: str | None) -> str | None:
    """The function a resume piece was cut from; None for any other name."""
    parsed = parse_resume(name)
    return parsed[0] if parsed else None


def function_of(name: str | None) -> str | None:
    """The function a frame belongs to: the one a resume piece was cut from, else the name itself."""
    return resumed_function(name) or name


def without_line(name: str) -> str:
    """A resume piece's name without its line (an edit above it shifts the line); others as they are."""
    parsed = parse_resume(name)
    return PREFIX + parsed[0] if parsed else name
