"""What the engine hands the server: the text a file's Findings were planned on (``Base``), one
buffer's analysis (``Analysis``) with its diagnostics (``Item``), code actions (``Action``), and
how a Finding reads as a diagnostic and in hover."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.lsp.positions import LineIndex, Range
from recompile_fix.profile.model import sha256_bytes

if TYPE_CHECKING:  # libcst and black load with the engine, not with the server
    from recompile_fix.analysis.source import SourceFile
    from recompile_fix.edits.rewrite import FileRewrite
    from recompile_fix.findings.rule import Rule

__all__ = [
    "FIX_ALL_KIND",
    "QUICKFIX_KIND",
    "SOURCE",
    "STALE_MESSAGE",
    "Action",
    "Analysis",
    "Base",
    "Item",
    "contains",
    "diagnostic_json",
    "diagnostic_message",
    "hover_markdown",
    "kind_wanted",
    "overlaps",
    "severity_of",
    "text_sha",
]

STALE_MESSAGE = "Profile is stale for this file: run `recompile-fix profile` again"
FIX_ALL_KIND = "source.fixAll.recompile-fix"
QUICKFIX_KIND = "quickfix"
SOURCE = "recompile-fix"


def text_sha(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


@dataclass
class Base:
    """A text the findings were planned on: the profiled text (``profiled``), or a buffer the
    Profile does not describe (static rules only)."""

    path: str
    text: str
    source: SourceFile | None  # None: does not parse
    findings: list[Finding]
    profiled: bool
    lines: LineIndex = field(init=False)
    rewrites: dict[frozenset, FileRewrite] = field(default_factory=dict)
    fixes: dict[tuple[int, str], Any] = field(default_factory=dict)  # (finding's index, torch name) -> Edits
    # sha256 of a text this server produced from ``text`` (suppression comments stripped) ->
    # the findings fixed in it
    states: dict[str, frozenset] = field(default_factory=dict)

    def __post_init__(self):
        self.lines = LineIndex(self.text)


@dataclass
class Item:
    """One diagnostic: a Finding (``index`` into its base's findings), or the stale-Profile note."""

    index: int | None
    finding: Finding | None
    range: Range
    message: str
    severity: str  # error / warning / information / hint
    data: dict[str, Any]

    @property
    def rule(self) -> str | None:
        return self.finding.rule if self.finding else None


SEVERITIES = ("error", "warning", "information", "hint")  # Item.severity -> DiagnosticSeverity 1..4


def diagnostic_json(item: Item) -> dict[str, Any]:
    """The item as an LSP ``Diagnostic``, written as lsprotocol's converter writes one (absent
    fields left out): the one definition, for the server (which structures it) and for the first
    file analysed before lsprotocol is loaded (lsp/first_analysis.py)."""
    from recompile_fix.rule_docs import rule_url

    (start_line, start_col), (end_line, end_col) = item.range
    diagnostic: dict[str, Any] = {
        "range": {
            "start": {"line": start_line, "character": start_col},
            "end": {"line": end_line, "character": end_col},
        },
        "severity": SEVERITIES.index(item.severity) + 1,
    }
    if item.rule:
        diagnostic["code"] = item.rule
        diagnostic["codeDescription"] = {"href": rule_url(item.rule)}
    diagnostic["source"] = SOURCE
    diagnostic["message"] = item.message
    diagnostic["data"] = item.data
    return diagnostic


@dataclass
class Analysis:
    path: str
    text: str
    sha: str
    base: Base  # the text its Findings were planned on
    applied: frozenset  # findings of ``base`` already fixed in this text
    current: str  # the text the positions refer to: rewrite(base, applied), before suppressions
    items: list[Item]
    stale: bool = False
    parses: bool = True
    note: str | None = None  # why nothing is offered (the text does not parse)
    _lines: LineIndex | None = field(default=None, repr=False)
    _fix_all: list | None = field(default=None, repr=False)

    @property
    def lines(self) -> LineIndex:
        if self._lines is None:
            self._lines = LineIndex(self.text)
        return self._lines


@dataclass
class Action:
    title: str
    kind: str
    edits: list[tuple[Range, str]] | None  # None: computed on codeAction/resolve
    items: list[Item] = field(default_factory=list)
    preferred: bool = False
    data: dict[str, Any] | None = None


def diagnostic_message(finding: Finding) -> str:
    message = finding.message
    if finding.safety is Safety.NONE and finding.notes:
        message += f"\nNo automatic fix: {finding.notes[0]}"
    elif finding.safety is Safety.UNSAFE:
        message += "\nThe fix is unsafe: offered as a quick fix only, never in fix-all."
    return message


def severity_of(finding: Finding) -> str:
    if finding.confidence != "profile":
        return "information"  # seen in the source alone: lower confidence
    return "warning" if finding.fixable else "information"


def kind_wanted(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def overlaps(a: Range, b: Range) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def contains(rng: Range, position: tuple[int, int]) -> bool:
    return rng[0] <= position <= rng[1]


def hover_markdown(item: Item, rules: dict[str, Rule]) -> str:
    if item.finding is None:
        return f"**recompile-fix**: {item.message}"
    finding = item.finding
    rule = rules.get(finding.rule)
    fix = {Safety.SAFE: "safe fix", Safety.UNSAFE: "unsafe fix (quick fix only)", Safety.NONE: "no fix"}
    head = f"**{finding.rule}**" + (f" {rule.name}" if rule else "") + f" · {fix[finding.safety]}"
    if finding.confidence != "profile":
        head += " · seen in the source alone"
    lines = [head, "", finding.message]
    if finding.notes:
        lines.append("")
        lines.extend(f"- {note}" for note in finding.notes)
    if finding.evidence:
        lines += ["", "**Evidence** (from the Profile)" if finding.confidence == "profile" else "**Evidence**"]
        for key, value in finding.evidence.items():
            label = key.replace("_", " ")
            if isinstance(value, (list, tuple)):
                if not value:
                    continue
                lines.append(f"- {label}:")
                lines.append("  ```")
                lines.extend(f"  {v}" for v in value)
                lines.append("  ```")
            else:
                lines.append(f"- {label}: `{value}`")
    return "\n".join(lines)
