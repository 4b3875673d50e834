"""Which of one frame's wraps merge compiles only together: a wrap of one number removes no
compile where another number the compiled code reads took a different value at every compile
and stays a number (``others_stay``), or is wrapped only by an unsafe fix (``alone_merges_nothing``)."""

from __future__ import annotations

from collections.abc import Iterable

from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.profile.model import Compile, Frame

__all__ = ["alone_merges_nothing", "others_stay"]


def alone_merges_nothing(frame: Frame, planned: list[Finding]) -> list[Finding]:
    """Safe wraps beside unsafe ones of the same frame, where no two compiles share the numbers
    the unsafe ones wrap: with safe fixes alone those numbers stay numbers and every compile stays
    (a trial's `kd_loss(..., T, alpha)`: `T` offered `[*]`, 4 -> 4). The safe ones become unproven
    too: `fix` keeps them where a run with the others shows fewer compiles."""
    unsafe = [f for f in planned if f.safety is Safety.UNSAFE and f.fixable and not f.fallback]
    sources = sorted({s for f in unsafe for entry in f.covers for s in entry.get("sources", [])})
    safe = [f for f in planned if f.safety is Safety.SAFE]
    if not sources or not safe:
        return planned
    recorded = _with_values(frame, sources)
    values = {_values(c, sources) for c in recorded}
    if len(recorded) < 2 or len(values) < len(recorded):
        return planned  # two compiles share them: a safe fix alone can merge those
    names = ", ".join(f"`{s}`" for s in sources)
    for finding in safe:
        finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
        finding.notes.append(
            f"alone it merges no compiles: {names} took another value at every compile and its own fix is "
            "unsafe; with it (`--unsafe-fixes`, or `fix`, which proves both on a run) the compiles merge"
        )
    return planned


def others_stay(frame: Frame, planned: list[Finding], kept: dict[str, Finding]) -> list[Finding]:
    """The frame's findings, where numbers the code reads that stay numbers (a sampler's `sigma`
    into `x.new_full(..., sigma)`, its `alpha` into `math.sqrt`) took a different value at every
    compile: no two compiles share them, so no fix of the other numbers can merge two compiles; a
    safe one becomes unproven (`fix` keeps it where a run shows fewer compiles; a trial: 2 -> 2),
    and the numbers that stay are reported with why. Where two compiles share their values (a
    grid of temperature and top_k), the others' fixes can merge those: left as they are."""
    if not kept or not any(f.fixable for f in planned):
        return planned
    recorded = _with_values(frame, kept)
    if len(recorded) < 2:
        return planned

    def staying(compile_) -> tuple[str, ...]:
        return _values(compile_, kept)

    def merges(finding: Finding) -> bool:
        """Do two compiles that agree on every staying number differ in this finding's number
        (then its fix can merge them)? Unknown values: assume so."""
        mine = [s for entry in finding.covers for s in entry.get("sources", [])]
        if not mine or any(not all("value" in (c.inputs.get(s) or {}) for c in recorded) for s in mine):
            return True
        return any(
            staying(a) == staying(b) and any(a.inputs[s]["value"] != b.inputs[s]["value"] for s in mine)
            for i, a in enumerate(recorded)
            for b in recorded[i + 1 :]
        )

    if len({staying(c) for c in recorded}) == len(recorded):
        merging: list[Finding] = []  # no two compiles share the staying numbers
    else:
        # A grid of temperature and top_k: the others' fixes merge the compiles that share
        # top_k and differ in temperature; none where the compiles that share it share the
        # other number too (a trial: `pick(logits, temperature, top_k)`, 2 -> 2 offered as [*]).
        merging = [f for f in planned if f.fixable and merges(f)]
        if len(merging) == len([f for f in planned if f.fixable]):
            return planned
    kept_numbers = list(kept.values())
    names = ", ".join(f"`{source}`" for source in kept)
    why = kept_numbers[0].notes[0] if kept_numbers[0].notes else "it stays a Python number"
    for finding in planned:
        # `dynamic=True` at the compile call makes the staying numbers symbolic too: not these.
        if any(finding is m for m in merging) or "compile_call" in finding.params:
            continue
        if finding.safety is Safety.SAFE:
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
        if finding.fixable:
            finding.notes.append(
                f"unproven: {names} also {'change' if len(kept_numbers) > 1 else 'changes'} between these "
                f"compiles and {'stay Python numbers' if len(kept_numbers) > 1 else 'stays a Python number'} the "
                f"compiled code reads ({why}): the call may still compile once per value; `fix` keeps "
                "this only where a run shows fewer compiles"
            )
    known = {id(f) for f in planned}
    return planned + [f for f in kept_numbers if id(f) not in known]


def _with_values(frame: Frame, sources: Iterable[str]) -> list[Compile]:
    """The frame's compiles whose recorded inputs hold a value for every one of ``sources``."""
    wanted = list(sources)
    return [c for c in frame.compiles if all("value" in (c.inputs.get(s) or {}) for s in wanted)]


def _values(compile_: Compile, sources: Iterable[str]) -> tuple[str, ...]:
    return tuple(repr(compile_.inputs[s]["value"]) for s in sources)
