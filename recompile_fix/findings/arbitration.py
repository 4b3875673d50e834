"""One fix per thing: where two rules' fixes would edit the same thing, one is kept and the other
gives no edit, with the reason.

The rules say it, not this module: each names what its Finding's fix edits
(``Rule.claims``: a ``Claim``, e.g. a stack of blocks) and, given a rival Finding of another
rule claiming the same, which of the two to keep and why (``Rule.prefer``: a ``Preference``,
computed from both Findings' evidence). ``arbitrate`` decides every such pair in one place, for
any two rules: RF004 (a nested compile region on a block) and RF007 (the blocks compiled one by
one) both claim a stack of blocks, and RF007 weighs the two (its folder holds the measurements).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recompile_fix.findings.finding import Finding, Safety

if TYPE_CHECKING:  # the rules are passed in; only the signature names their type
    from recompile_fix.findings.rule import Rule

__all__ = ["Claim", "Preference", "arbitrate"]


@dataclass(frozen=True)
class Claim:
    """What a fix edits: ``thing`` (``"stack of `Block` blocks"``), held by the program at the
    attribute ``path``, matched from its end: the container's ``layers`` is the compiled module's
    ``model.layers`` (an empty path: wherever the program holds it). ``does`` says what the fix
    does to it, in the words a rival's note gives (``compiles these blocks one by one``)."""

    thing: str
    path: str
    does: str

    def overlaps(self, other: Claim) -> bool:
        if self.thing != other.thing:
            return False
        shorter, longer = sorted((self.path, other.path), key=len)
        return not shorter or longer == shorter or longer.endswith("." + shorter)


@dataclass(frozen=True)
class Preference:
    """A rule's word on two fixes of the same thing: ``keep`` its own Finding's (True) or the
    rival's (False), and ``why``, which the loser's note gives after naming the winner."""

    keep: bool
    why: str


def arbitrate(findings: Iterable[Finding], rules: Iterable[Rule]) -> list[Finding]:
    """The findings, with the loser of each pair of fixes that claim the same thing turned into
    no edit (in place). Each pair of fixable Findings of two rules whose claims overlap, in order:
    the earlier Finding's rule is asked first, then the other's; where neither has a word, both
    stay. A Finding that already gives no edit is left alone, and one that lost meets no other."""
    findings = list(findings)
    by_id = {rule.id: rule for rule in rules}
    claims = {id(f): by_id[f.rule].claims(f) if f.rule in by_id and f.fixable else [] for f in findings}
    # Only Findings that claim the same thing can meet: each is paired with the later ones of its
    # things' (a large tree has hundreds of Findings, few of them rivals).
    claimants = [f for f in findings if claims[id(f)]]
    by_thing: dict[str, list[int]] = {}
    for index, finding in enumerate(claimants):
        for thing in {c.thing for c in claims[id(finding)]}:
            by_thing.setdefault(thing, []).append(index)
    for index, first in enumerate(claimants):
        rivals = sorted({i for c in claims[id(first)] for i in by_thing[c.thing] if i > index})
        for second in (claimants[i] for i in rivals):
            if not (first.fixable and second.fixable) or first.rule == second.rule:
                continue
            shared = _shared(claims[id(first)], claims[id(second)])
            if shared is None:
                continue
            decided = _decide(first, second, by_id)
            if decided is None:
                continue
            winner, why = decided
            loser = second if winner is first else first
            does = shared[0] if winner is first else shared[1]
            _no_edit(loser, f"{winner.rule} {does.does} instead ({winner.file}:{winner.location.line}): {why}")
    return findings


def _shared(mine: list[Claim], theirs: list[Claim]) -> tuple[Claim, Claim] | None:
    """The first two claims, one of each side, on the same thing."""
    return next(((a, b) for a in mine for b in theirs if a.overlaps(b)), None)


def _decide(first: Finding, second: Finding, rules: dict[str, Rule]) -> tuple[Finding, str] | None:
    """The Finding to keep of the two, and why; None when neither rule has a word on it."""
    for own, rival in ((first, second), (second, first)):
        preference = rules[own.rule].prefer(own, rival)
        if preference is not None:
            return (own if preference.keep else rival), preference.why
    return None


def _no_edit(finding: Finding, why: str) -> None:
    finding.safety = Safety.NONE
    finding.notes.insert(0, why)
