"""Findings for people and machines, in ruff's shapes:

* ``concise``: ``path:line:col: RF001 [*] message``, one line a finding (ruff's default);
* ``full`` (``text``, its old name): that line and the finding's notes, wrapped to the terminal's
  width (not wrapped when the output is not a terminal);
* ``json``: ruff's fields (``code``, ``message``, ``filename``, 1-based ``location`` and
  ``end_location`` in characters, ``fix`` with ``applicability``, ``message`` and ``edits``,
  ``url``, ``noqa_row``), then ours (``safety``, ``confidence``, ``notes``, ``evidence``);
* ``sarif``: SARIF 2.1.0, each result's ``fixes`` (its replacements), each rule's ``helpUri``;
* ``github``: workflow annotations with start and end positions.

Each fix in json and sarif is the Finding's own (as ruff reports each), ``import torch``
included where the file lacks it; `apply` writes all of a file's fixes together.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import recompile_fix
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.pipeline.fix import FindingFix, finding_fixes
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.reason_classes import reason_id
from recompile_fix.reason_docs import reason_url
from recompile_fix.rule_docs import REPOSITORY, rule_summary, rule_url

__all__ = ["FORMATS", "render", "sarif", "terminal_width", "wrap"]

FORMATS = ("concise", "full", "text", "json", "sarif", "github")
_SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def terminal_width() -> int | None:
    """The width to wrap text to when stdout is a terminal (its width; ``$COLUMNS`` wins, as
    everywhere); None (do not wrap) when the output goes to a file or a pipe, as ruff's."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def wrap(text: str, width: int | None, indent: str = "    ") -> str:
    """Each line of ``text`` wrapped to ``width`` (None: as it is); a continuation line keeps the
    line's own indentation plus ``indent``. Words (paths, code) are never broken."""
    if not width:
        return text
    lines = []
    for line in text.split("\n"):
        if len(line) <= width:
            lines.append(line)
            continue
        own = line[: len(line) - len(line.lstrip())]
        lines.append(
            textwrap.fill(
                line.strip(),
                width=max(width, 40),
                initial_indent=own,
                subsequent_indent=own + indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(lines)


def render(
    findings: list[Finding],
    fmt: str,
    *,
    unsafe_fixes: bool = False,
    rules: tuple[Any, ...] = (),
    root: str | os.PathLike[str] | None = None,
    width: int | None = None,
    memo: Any = None,
) -> str:
    """``findings`` in ``fmt``; ``root``: the directory their paths are relative to (for
    character columns and each fix's edits; default: here); ``width``: wrap text to it;
    ``memo``: the run's DerivedCache (pipeline.memo), which knows each fix's edits from before."""
    if fmt in ("full", "text"):
        return "".join(wrap(f.describe(unsafe_fixes=unsafe_fixes), width) + "\n" for f in findings)
    if fmt == "concise":
        return "".join(f.describe(unsafe_fixes=unsafe_fixes, notes=False) + "\n" for f in findings)
    texts = _Texts(Path(root or os.getcwd()))
    if fmt == "github":
        return "".join(_github(f, texts) + "\n" for f in findings)
    fixes = finding_fixes(Path(root or os.getcwd()), findings, tuple(rules), memo=memo)
    names = {rule.id: rule.name for rule in rules}
    if fmt == "json":
        return json.dumps([_json(f, fix, texts, names) for f, fix in zip(findings, fixes)], indent=1) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(findings, rules, fixes=fixes, texts=texts), indent=1) + "\n"
    raise ValueError(fmt)


class _Texts:
    """The files' texts, read once each, to turn a Location's UTF-8 column (as CPython gives
    it) into a 1-based character column, as ruff, SARIF (unicodeCodePoints) and editors count."""

    def __init__(self, root: Path):
        self.root = root
        self._lines: dict[str, list[str] | None] = {}

    def column(self, path: str, line: int, utf8_col: int | None) -> int:
        col = utf8_col or 0
        if path not in self._lines:
            try:
                self._lines[path] = read_named_file(path, self.root).decode("utf-8").splitlines(keepends=True)
            except (OSError, UnicodeDecodeError):
                self._lines[path] = None
        lines = self._lines[path]
        if lines is None or not 0 < line <= len(lines):
            return col + 1
        return len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "ignore")) + 1

    def span(self, finding: Finding) -> tuple[dict[str, int], dict[str, int]]:
        """(location, end_location) as ruff writes them: rows and 1-based character columns,
        the end exclusive."""
        loc = finding.location
        start = {"row": loc.line, "column": self.column(finding.file, loc.line, loc.col)}
        end_row = loc.end_line or loc.line
        end_col = self.column(finding.file, end_row, loc.end_col) if loc.end_col is not None else start["column"]
        return start, {"row": end_row, "column": end_col}


def _position(text: str, offset: int) -> dict[str, int]:
    """A character offset of ``text`` as a row and a 1-based column."""
    line_start = text.rfind("\n", 0, offset) + 1
    return {"row": text.count("\n", 0, offset) + 1, "column": offset - line_start + 1}


def _ordered_edits(fix: FindingFix) -> list[tuple[int, int, str]]:
    """The fix's edits in position order, insertions at one point merged into one (in the order
    they apply), so that a consumer may apply them in any order."""
    merged: list[tuple[int, int, str]] = []
    for edit in sorted(fix.edits, key=lambda e: (e.start, e.end)):  # stable: keeps insertion order
        if merged and edit.start == edit.end == merged[-1][0] == merged[-1][1]:
            merged[-1] = (edit.start, edit.end, merged[-1][2] + edit.new_text)
        else:
            merged.append((edit.start, edit.end, edit.new_text))
    return merged


def _applicability(finding: Finding) -> str:
    return "safe" if finding.safety is Safety.SAFE else "unsafe"


def _fix_title(finding: Finding, names: dict[str, str]) -> str:
    name = names.get(finding.rule)
    return f"Fix {finding.rule} ({name})" if name else f"Fix {finding.rule}"


def _reasons(finding: Finding) -> list[dict[str, str]]:
    """The recompile reasons (registry IDs, docs/reasons/) the Finding is about: the kinds of the
    recompiles it covers, in the registry's order."""
    kinds = {kind for cover in finding.covers for kind in cover.get("kinds", ())}
    ids = sorted({reason_id(kind) for kind in kinds})
    return [{"id": i, "url": reason_url(i)} for i in ids]


def _json(finding: Finding, fix: FindingFix | None, texts: _Texts, names: dict[str, str]) -> dict[str, Any]:
    location, end_location = texts.span(finding)
    return {
        "code": finding.rule,
        "message": finding.message,
        "filename": finding.file,
        "location": location,
        "end_location": end_location,
        "noqa_row": finding.location.line,
        "fix": None
        if fix is None
        else {
            "applicability": _applicability(finding),
            "message": _fix_title(finding, names),
            "edits": [
                {"content": content, "location": _position(fix.text, start), "end_location": _position(fix.text, end)}
                for start, end, content in _ordered_edits(fix)
            ],
        },
        "url": rule_url(finding.rule),
        "reasons": _reasons(finding),
        "safety": finding.safety.value,
        "confidence": finding.confidence,
        "notes": finding.notes,
        "evidence": finding.evidence,
        "params": finding.params,
    }


def _escape_github(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_github_property(text: str) -> str:
    return _escape_github(text).replace(":", "%3A").replace(",", "%2C")


def _github(finding: Finding, texts: _Texts) -> str:
    start, end = texts.span(finding)
    level = "warning" if finding.fixable else "notice"
    message = f"{finding.rule} {finding.message}" + "".join(f" Note: {n}" for n in finding.notes)
    return (
        f"::{level} title=recompile-fix ({finding.rule}),file={_escape_github_property(finding.file)},"
        f"line={start['row']},col={start['column']},endLine={end['row']},endColumn={end['column']}"
        f"::{_escape_github(message)}"
    )


def _region(start: dict[str, int], end: dict[str, int]) -> dict[str, int]:
    return {
        "startLine": start["row"],
        "startColumn": start["column"],
        "endLine": end["row"],
        "endColumn": end["column"],
    }


def sarif(
    findings: list[Finding],
    rules: tuple[Any, ...] = (),
    *,
    fixes: list[FindingFix | None] | None = None,
    texts: _Texts | None = None,
) -> dict[str, Any]:
    texts = texts or _Texts(Path.cwd())
    fixes = fixes if fixes is not None else [None] * len(findings)
    names = {rule.id: rule.name for rule in rules}
    rule_entries: list[dict[str, Any]] = []
    index = {}
    for rule in rules:
        index[rule.id] = len(rule_entries)
        docs = rule.docs()
        rule_entries.append(
            {
                "id": rule.id,
                "name": rule.name,
                "shortDescription": {"text": rule_summary(rule)},
                "help": {"text": docs, "markdown": docs},
                "helpUri": rule_url(rule.id),
            }
        )
    results = []
    for f, fix in zip(findings, fixes):
        start, end = texts.span(f)
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": "warning" if f.fixable else "note",
            "message": {"text": f.message + "".join(f"\nNote: {n}" for n in f.notes)},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.file}, "region": _region(start, end)}}],
            "properties": {
                "safety": f.safety.value,
                "confidence": f.confidence,
                "evidence": f.evidence,
                "reasons": _reasons(f),
            },
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        if fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": _fix_title(f, names)},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": f.file},
                            "replacements": [
                                {
                                    "deletedRegion": _region(_position(fix.text, start), _position(fix.text, end)),
                                    "insertedContent": {"text": content},
                                }
                                for start, end, content in _ordered_edits(fix)
                            ],
                        }
                    ],
                    "properties": {"applicability": _applicability(f)},
                }
            ]
        results.append(result)
    return {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "recompile-fix",
                        "version": recompile_fix.__version__,
                        "informationUri": REPOSITORY,
                        "rules": rule_entries,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
