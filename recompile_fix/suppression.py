"""Trailing suppression comments: `# recompile-fix: ignore[RF001, RF002]`, or a bare
`# recompile-fix: ignore` for every rule, on the line a finding points at; and ruff's and
flake8's spelling, the one people type: `# noqa: RF001`, `# noqa: E501, RF003` (codes by comma
or space), or a bare `# noqa` for every rule. A `# noqa` naming only other tools' codes
(`# noqa: E501`) suppresses none of ours."""

from __future__ import annotations

import re

__all__ = ["can_suppress", "is_suppressed", "strip_suppressions", "suppressed_rules", "with_suppression"]

_COMMENT = re.compile(r"#\s*recompile-fix:\s*ignore(?:\[(?P<ids>[A-Za-z0-9_,\s]*)\])?")
_CODE = r"[A-Za-z]+[0-9]+"
_NOQA = re.compile(rf"#\s*(?i:noqa)(?![\w-])(?:\s*:\s*(?P<ids>{_CODE}(?:(?:\s*,\s*|[ \t]+){_CODE})*))?")


def can_suppress(data: bytes) -> bool:
    """Can a file's bytes hold a suppression comment at all? (Most files cannot: their lines are
    never split.) Substring tests, not a regex: an alternation loses the literal search."""
    return b"recompile-fix" in data or b"noqa" in data.lower()


def suppressed_rules(line_text: str) -> set[str] | None:
    """The rule ids a line suppresses; an empty set means all; None means no comment."""
    found: set[str] | None = None
    for pattern in (_COMMENT, _NOQA):
        match = pattern.search(line_text)
        if match is None:
            continue
        ids = match.group("ids")
        if ids is None:
            return set()
        found = (found or set()) | {part.upper() for part in re.split(r"[\s,]+", ids) if part}
    return found


def is_suppressed(line_text: str, rule_id: str) -> bool:
    rules = suppressed_rules(line_text)
    return rules is not None and (not rules or rule_id.upper() in rules)


def with_suppression(line_text: str, rule_id: str) -> str:
    """The line with ``rule_id`` added to its suppression comment (or a new one)."""
    body = line_text.rstrip("\r\n")
    ending = line_text[len(body) :]
    rules = suppressed_rules(body)
    if rules is not None and (not rules or rule_id in rules):
        return line_text
    if rules is not None:
        ids = ", ".join(sorted(rules | {rule_id}))
        return _COMMENT.sub(f"# recompile-fix: ignore[{ids}]", body, count=1) + ending
    return f"{body}  # recompile-fix: ignore[{rule_id}]{ending}"


_STRIP = re.compile(r"[ \t]*(?:" + _COMMENT.pattern + "|" + _NOQA.pattern.replace("?P<ids>", "?:") + r"[^\r\n]*)")


def strip_suppressions(text: str) -> str:
    """``text`` without its suppression comments (and the blanks before each). Adding or
    removing one changes no line number and no column before it: the editor uses this to see
    that a file differs from the profiled one by suppression comments alone."""
    return _STRIP.sub("", text) if "recompile-fix" in text or "noqa" in text.lower() else text
