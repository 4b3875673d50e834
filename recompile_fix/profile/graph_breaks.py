"""torch's graph-break text (the ``graph_breaks`` log the recorder reads, and the
``dynamo_graph_break_reason`` artifact of a TORCH_TRACE directory, which carries the same text):
the user file:line of the break and what broke. Standard library only: the recorder runs it in
the user's process."""

from __future__ import annotations

import re

__all__ = ["logging_call", "parse_graph_break"]

_AT = re.compile(r"Graph break (?:\(user stack suppressed[^)]*\) )?in user code at (.+):(\d+)")
_REASON = re.compile(r"Graph Break Reason: (.+)")
# torch 2.6: ``Reason: Unsupported: 'skip function graph_break in file .../decorators.py'``, then
# ``User code traceback:`` (no generic first line, no detail line).
_REASON_2_6 = re.compile(r"^\s*Reason: (.+)", re.M)
_NOT_DETAIL = ("User code traceback", "Traceback (most recent call last)")
# "logging.Logger method not supported": the debug context names the logger and its method
# (``method: <Logger transformers.modeling_utils (WARNING)>.warning_once, args: ...``).
_LOGGER_CALL = re.compile(
    r"Developer debug context: method: <(?:Root)?Logger (?P<name>[^<>()]+?) \([^()]*\)>\.(?P<method>[A-Za-z_]\w*)\b"
)


def parse_graph_break(text: str) -> tuple[str, int, str] | None:
    """(file as torch wrote it, line, reason) of one graph break, or None when ``text`` is not one."""
    where = _AT.search(text)
    if not where:
        return None
    reason = _REASON.search(text) or _REASON_2_6.search(text)
    lines = [line.strip() for line in text[reason.end() :].splitlines()] if reason else []
    # The first line is generic ("Encountered graph break when attempting to trace CALL");
    # the next names what broke (e.g. "Call to `torch._dynamo.graph_break()`").
    detail = next((line for line in lines if line), "")
    if detail.startswith(_NOT_DETAIL):
        detail = ""
    return (
        where.group(1),
        int(where.group(2)),
        " ".join(p for p in [reason.group(1).strip() if reason else "", detail] if p),
    )


def logging_call(text: str) -> tuple[str, str] | None:
    """(logger name, method) of a graph break at a ``logging.Logger`` method call, or None."""
    match = _LOGGER_CALL.search(text)
    return (match.group("name").strip(), match.group("method")) if match else None
