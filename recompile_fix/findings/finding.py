"""Findings: the second stage of the flow. A Finding says which rule fires where, with what
parameters, on what evidence, and how safe its fix is. Rules make them from a Profile (or from
the source alone, in static mode); rewriting turns them into Edits."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from recompile_fix.notebook import display_location
from recompile_fix.profile.model import Frame, Location, Reason

__all__ = ["PROVEN", "TRADE_OFF", "UNPROVEN", "Finding", "cover", "frame_evidence", "Safety", "stands_in_for"]


class Safety(str, Enum):
    SAFE = "safe"  # applied by `apply`, offered in fix-all
    UNSAFE = "unsafe"  # applied only with --unsafe-fixes; may change behaviour or speed
    NONE = "none"  # no edit: the finding explains why (a negative case)


# Why an unsafe fix is unsafe (``Finding.unsafe_because``):
UNPROVEN = "unproven"  # the rule could not prove it from the source and the Profile: a run can
#   (`fix` tries it on a copy and keeps it only when it removes compiles, keeps the outputs and
#   adds no graph break or frame: "verified on this program")
TRADE_OFF = "trade-off"  # it changes performance characteristics by design (a graph break, regional
#   compile, `dynamic=True`): the user's call, made with --unsafe-fixes
PROVEN = "verified on this program"  # the note `fix` adds to an unproven fix its run proved


@dataclass
class Finding:
    rule: str
    file: str  # as the Profile spells it (relative to the project root when under it)
    location: Location  # where the fix goes; what editors underline
    message: str
    safety: Safety
    params: dict[str, Any] = field(default_factory=dict)  # what the rule's fix needs
    evidence: dict[str, Any] = field(default_factory=dict)  # guard texts, compiles, seconds
    notes: list[str] = field(default_factory=list)  # e.g. why torch will still recompile
    confidence: str = "profile"  # "profile" (seen at run time) or "static" (seen in source)
    # The recompiles this Finding is about (findings.accounting): each {"frame": Frame.label,
    # "sources": guarded expressions (absent: any), "kinds": reason kinds (absent: any)}.
    covers: list[dict[str, Any]] = field(default_factory=list)
    # The torch the fix is for: the Profile's (set by plan); None in static mode (the installed one).
    torch_version: str | None = None
    # An unsafe fix's kind (UNPROVEN or TRADE_OFF); a rule that does not say files a trade-off,
    # which `fix` never tries without --unsafe-fixes.
    unsafe_because: str = TRADE_OFF
    # How close the outputs of an unproven fix must stay, as the rule declares and names it (e.g.
    # {"why": "float32 rounding of the scalar", "rtol": 1.3e-6, "atol": 1e-5}; no numbers: torch's
    # assert_close defaults); None: exactly.
    tolerance: dict[str, Any] | None = None
    # Another way to fix what a fixable Finding of the same rule with the same ``covers`` fixes
    # (RF003's `dynamic=True` at the compile call beside its tensor lr): made only where that one
    # is not (``apply``: not selected; ``fix``: not kept after its trial).
    fallback: bool = False

    @property
    def unproven(self) -> bool:
        """An unsafe fix a run can prove (`fix` tries it in safe mode)."""
        return self.safety is Safety.UNSAFE and self.unsafe_because == UNPROVEN

    @property
    def fixable(self) -> bool:
        return self.safety is not Safety.NONE

    def to_json(self) -> dict[str, Any]:
        # What ``dataclasses.asdict`` gives, built directly: asdict deep-copies leaf by leaf, a
        # third of a warm scan's time over a large tree (its memo keys are these dicts).
        data = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        data["safety"] = self.safety.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Finding":
        return cls(
            rule=data["rule"],
            file=data["file"],
            location=Location(**data["location"]),
            message=data["message"],
            safety=Safety(data["safety"]),
            params=data.get("params", {}),
            evidence=data.get("evidence", {}),
            notes=list(data.get("notes", [])),
            confidence=data.get("confidence", "profile"),
            covers=list(data.get("covers", [])),
            torch_version=data.get("torch_version"),
            unsafe_because=data.get("unsafe_because", TRADE_OFF),
            tolerance=data.get("tolerance"),
            fallback=bool(data.get("fallback", False)),
        )

    def describe(self, *, unsafe_fixes: bool = False, notes: bool = True) -> str:
        """ruff-style: ``path:line:col: RF001 [*] message``, then one line per note (``notes``)."""
        loc = self.location
        marker = {
            Safety.SAFE: "[*] ",
            Safety.UNSAFE: "[*] " if unsafe_fixes else "[unsafe fix] ",
            Safety.NONE: "[no fix] ",
        }[self.safety]
        where = display_location(self.file, loc.line)  # a notebook's: nb.ipynb:cell 3:2
        lines = [f"{where}:{(loc.col or 0) + 1}: {self.rule} {marker}{self.message}"]
        if notes:
            lines.extend(f"    note: {note}" for note in self.notes)
        return "\n".join(lines)


def stands_in_for(fallback: Finding, other: Finding) -> bool:
    """Is ``fallback`` another way to fix what ``other`` fixes (see ``Finding.fallback``)? One
    fallback may fix what several Findings do (one `dynamic=True` for two floats of a frame)."""
    return (
        fallback.fallback
        and not other.fallback
        and other is not fallback
        and other.fixable
        and other.rule == fallback.rule
        and all(c in fallback.covers for c in other.covers)
        and (bool(other.covers) or not fallback.covers)
    )


def frame_evidence(frame: Frame, guards: Iterable[Reason] = (), **more: Any) -> dict[str, Any]:
    """The evidence a Finding about a recompiling frame shows first: the frame, its compiles,
    recompiles and compile seconds; then ``more``; then the first lines of up to five of the
    ``guards`` that failed (distinct, sorted)."""
    evidence: dict[str, Any] = {
        "frame": f"{frame.name} ({frame.file}:{frame.first_line})",
        "compiles": frame.compile_count,
        "recompiles": frame.recompiles,
        "compile_seconds": round(frame.compile_seconds, 3),
        **more,
    }
    evidence["guards"] = sorted({r.text.split("\n", 1)[0] for r in guards})[:5]
    return evidence


def cover(
    frame: Frame, sources: Iterable[str] = (), kinds: Iterable[str] = (), dims: Iterable[tuple[str, int]] = ()
) -> dict[str, Any]:
    """One entry of ``Finding.covers``: the recompiles of ``frame`` whose guard is on one of
    ``sources`` (any, when empty) and of one of ``kinds`` (any, when empty); with ``dims``
    (source, dim), a size guard on another dim of a source named there is not covered (a mark on
    the batch dim fixes no change of the sequence length)."""
    entry: dict[str, Any] = {"frame": frame.label}
    if sources:
        entry["sources"] = sorted(set(sources))
    if kinds:
        entry["kinds"] = sorted(set(kinds))
    by_source: dict[str, set[int]] = {}
    for source, dim in dims:
        by_source.setdefault(source, set()).add(dim)
    if by_source:
        entry["dims"] = {source: sorted(found) for source, found in by_source.items()}
    return entry


_ATOMS = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """``value`` as ``asdict`` copies it: containers and dataclasses rebuilt, atoms shared."""
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return copy.deepcopy(value)
