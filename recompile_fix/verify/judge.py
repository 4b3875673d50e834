"""What a run must show before a fix is kept, beyond "nothing worse" (``compare.compare_runs``):

* **it changes something**: a run with the same compiles, the same recompile reasons, limit
  hits and graph breaks, frame by frame, as the run before it shows a fix that changes nothing
  on this program (a ``maybe_mark_dynamic`` on a size the code specialises, a fix for a program
  already at its minimum). It is never kept. A rule whose fix keeps the compiles on purpose (it
  makes each compile cheaper: RF004) says so (``Rule.verify_allows``: "same_compiles").
* **an unproven fix proves itself** (``Finding.unproven``: the rule could not tell statically):
  fewer compiles in all, outputs compared (some compiled callable returned a tensor) and equal
  exactly, or within the tolerance the rule declares and names (``Finding.tolerance``), and no
  new compiled frame, even one that compiles once.
* **per fix, in a set that verified together**: a fix whose recompiles (``Finding.covers``) all
  still happen, as often, after the set is a *suspect*: the set's run cannot tell whether it
  did anything (``suspects``); ``prove.select_verified`` runs the set without the suspects to
  find out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from recompile_fix.findings.finding import Finding
from recompile_fix.profile.model import Frame, Profile, Reason
from recompile_fix.profile.resume import without_line

__all__ = ["NO_OP", "Tolerance", "changes_nothing", "covered", "declared", "proof_tolerance", "suspects", "unproven_in"]

NO_OP = "changes nothing on this program"


@dataclass
class Tolerance:
    """How close recorded tensors must be: torch.testing.assert_close's defaults (per dtype),
    given ``rtol``/``atol`` (the other one defaults to 0), or bit for bit."""

    exact: bool = False
    rtol: float | None = None
    atol: float | None = None
    # The user did not pass --unsafe-fixes: an unproven fix is kept only with the outputs bit for
    # bit, whatever tolerance its rule declares (a kept fix is shown `[*]`, which promises the bits).
    unproven_exact: bool = False

    def describe(self) -> str:
        if self.exact:
            return "exactly"
        if self.rtol is None and self.atol is None:
            return "with torch.testing.assert_close's default tolerances"
        return f"with rtol={self.rtol or 0:g}, atol={self.atol or 0:g}"


def _reason_key(reason: Reason) -> tuple:
    return (reason.kind, reason.source, reason.dim)


def _frame_key(frame: Frame) -> tuple:
    return (frame.file, without_line(frame.name))


def _signature(profile: Profile) -> Counter:
    """Per frame (file, name without its line), its compiles, limit hits, graph breaks and the
    reasons of its recompiles: what a fix that changes something changes."""
    signature: Counter = Counter()
    for frame in profile.frames:
        key = _frame_key(frame)
        signature[(key, "compiles")] += frame.compile_count
        signature[(key, "limit_hits")] += frame.limit_hits
        signature[(key, "graph_breaks")] += sum(b.count for b in frame.graph_breaks)
        for compile_ in frame.compiles:
            if compile_.is_recompile or compile_.limit_hit:
                for reason in {_reason_key(r) for r in compile_.reasons}:
                    signature[(key, reason)] += 1
    return +signature


def changes_nothing(before: Profile, after: Profile) -> bool:
    """Do the two runs compile alike: the same frames, compiles, limit hits, graph breaks, and
    recompiles for the same reasons?"""
    return _signature(before) == _signature(after)


def unproven_in(fixes: Iterable[Finding]) -> list[Finding]:
    return [f for f in fixes if f.unproven]


def _strictness(tolerance: Tolerance) -> tuple[int, float, float]:
    """Lower is stricter: exact, then given numbers (the smaller the stricter), then torch's
    defaults."""
    if tolerance.exact:
        return (0, 0.0, 0.0)
    if tolerance.rtol is None and tolerance.atol is None:
        return (2, 0.0, 0.0)
    return (1, tolerance.rtol or 0.0, tolerance.atol or 0.0)


def declared(finding: Finding) -> Tolerance:
    """The tolerance an unproven fix's outputs are held to: exactly, unless its rule declares one
    (``{"why": ..., "rtol": ..., "atol": ...}``; no numbers: torch's assert_close defaults)."""
    if finding.tolerance is None:
        return Tolerance(exact=True)
    rtol, atol = finding.tolerance.get("rtol"), finding.tolerance.get("atol")
    return Tolerance(rtol=rtol, atol=atol)


def kernel_rounding(finding: Finding) -> bool:
    """Does the fix round only as the backend's kernels do (another kernel for a dynamic size),
    the program's own arithmetic unchanged? Such rounding is what compiling does anyway, so plain
    `fix` holds it to assert_close, not to the bits a fix that changes the arithmetic must keep
    (a 0-d tensor for a Python number)."""
    return bool(finding.tolerance and finding.tolerance.get("kernel"))


def proof_tolerance(fixes: Iterable[Finding], tolerance: Tolerance) -> tuple[Tolerance, str | None]:
    """The tolerance a run of ``fixes`` is judged with: the user's (``tolerance``), or an unproven
    fix's, where stricter; and, then, which fix asks for it and why (for the notes)."""
    chosen, why = tolerance, None
    for fix in unproven_in(fixes):
        bits = tolerance.unproven_exact and not kernel_rounding(fix)  # plain `fix`: the bits, or the kernels' rounding
        own = Tolerance(exact=True) if bits else declared(fix)
        if _strictness(own) < _strictness(chosen):
            reason = (fix.tolerance or {}).get("why") or "its rule declares no tolerance"
            if bits and fix.tolerance is not None:
                reason = (
                    f"without --unsafe-fixes it must keep the outputs bit for bit (its rule allows rounding: {reason})"
                )
            chosen, why = own, f"{fix.rule}'s unproven fix at {fix.file}:{fix.location.line}: {reason}"
    return chosen, why


def covered(profile: Profile, fix: Finding) -> Counter:
    """The recompiles ``fix`` is about in ``profile``: per (frame, reason), how many."""
    counts: Counter = Counter()
    for frame in profile.frames:
        entries = [e for e in fix.covers if e.get("frame") is not None and _same_frame(e["frame"], frame)]
        if not entries:
            continue
        for compile_ in frame.compiles:
            if not compile_.is_recompile or compile_.limit_hit:
                continue
            for reason in {_reason_key(r) for r in compile_.reasons}:
                kind, source, _ = reason
                if any(
                    (not e.get("sources") or source in e["sources"]) and (not e.get("kinds") or kind in e["kinds"])
                    for e in entries
                ):
                    counts[(_frame_key(frame), reason)] += 1
    return counts


def _same_frame(label: str, frame: Frame) -> bool:
    """A cover's frame label (``name (file:line)``) names ``frame``, whatever its line now."""
    name, _, rest = label.partition(" (")
    file = rest.rsplit(":", 1)[0]
    return (file, without_line(name)) == _frame_key(frame)


def suspects(before: Profile, after: Profile, fixes: list[Finding], same_compiles: set[str]) -> list[Finding]:
    """The fixes of a set that verified together whose own recompiles all still happen, as
    often, after it: the set's run does not show that they did anything. A fix that names no
    recompile (a static Finding) is a suspect when the set removed no compile at all, or when
    the set holds a fix that names some: the compiles removed may all be the other's (two
    optimizers, one a static finding: its fix removed none and only changed the numbers);
    ``same_compiles``: rules whose fixes keep the compiles on purpose, never suspects."""
    out = []
    fewer = sum(f.compile_count for f in after.frames) < sum(f.compile_count for f in before.frames)
    named = [fix for fix in fixes if fix.rule not in same_compiles and covered(before, fix)]
    for fix in fixes:
        if fix.rule in same_compiles:
            continue
        mine = covered(before, fix)
        if not mine:
            if not fewer or named:
                out.append(fix)
            continue
        still = covered(after, fix)
        if all(still.get(key, 0) >= n for key, n in mine.items()):
            out.append(fix)
    return out
