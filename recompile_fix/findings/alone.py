"""Safe fixes that change nothing alone. `apply` makes the safe fixes together; a recompile stays
where its call failed a guard no safe fix covers, so a safe fix each of whose recompiles fails
such a guard too removes none:

* a number's fix (a 0-d tensor) where a tensor's size changed at every compile where the number
  did, and no safe fix marks that size (a trial's sampler: `cfg_scale` offered `[*]` changed
  only with the latent's size, 3 -> 3);
* any fix where each recompile it is about also failed a guard torch named, or the run shows
  failing (``accounting.serving_entries``), that no safe fix covers (trials: a mark whose size
  changed with a `Dropout.p` schedule, 8 -> 8; a float whose calls also changed strides).

Such a fix is unproven: `fix` tries it on a run with the unsafe fixes, and keeps what merges
compiles."""

from __future__ import annotations

from recompile_fix.findings.accounting import covers_reason, serving_entries, static_size_change
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.profile.model import Compile, Frame, Profile, Reason

__all__ = ["unproven_where_other_guards_fail_too", "unproven_where_sizes_change_too"]


def unproven_where_sizes_change_too(findings: list[Finding], profile: Profile) -> None:
    frames = {frame.label: frame for frame in profile.frames}
    # What the safe fixes mark, per frame, as planned (before any is made unproven here).
    marked = {label: _safely_marked(findings, frame) for label, frame in frames.items()}
    for finding in findings:
        if finding.safety is not Safety.SAFE:
            continue
        for entry in finding.covers:
            frame = frames.get(entry.get("frame", ""))
            numbers = entry.get("sources") or []
            if frame is None or not numbers:
                continue
            recorded = [c for c in frame.compiles if all("value" in (c.inputs.get(s) or {}) for s in numbers)]
            pairs = [
                (a, b)
                for i, a in enumerate(recorded)
                for b in recorded[i + 1 :]
                if any(a.inputs[s]["value"] != b.inputs[s]["value"] for s in numbers)
            ]
            changed = [_static_size_changed(a, b, marked[frame.label]) for a, b in pairs]
            if not pairs or any(c is None for c in changed):
                continue
            names = ", ".join(f"`{c}`" for c in dict.fromkeys(changed))
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(
                f"unproven: the size of {names} changed at every compile where it did, and no safe fix marks "
                "it: alone this fix merges no compile; with the mark (`fix`, which proves both on a run) it can"
            )
            break


def _safely_marked(findings: list[Finding], frame: Frame) -> set[str]:
    """The sources a safe fix of the frame covers by name (RF001's marks)."""
    return {
        source
        for f in findings
        if f.safety is Safety.SAFE
        for entry in f.covers
        if entry.get("frame") == frame.label
        for source in entry.get("sources") or []
    }


def _static_size_changed(a: Compile, b: Compile, marked: set[str]) -> str | None:
    """A tensor, no safe fix marks, that both compiles were given and that differs in a size the
    earlier graph (``a``) did not trace as dynamic (so it could not serve the later size), or None."""
    return next((s for s in a.inputs if s not in marked and static_size_change(a, b, s) is not None), None)


def unproven_where_other_guards_fail_too(findings: list[Finding], profile: Profile) -> None:
    """Each safe fix that is about recompiles (covers a guard they failed) but would let no cache
    entry serve any of them, for a guard no safe fix covers, made unproven. One pass: an entry
    that a fix helps merge has every guard covered by a safe fix, so none of those fixes is made
    unproven here, and making one unproven leaves no other alone."""
    frames = {frame.label: frame for frame in profile.frames}
    safe = [f for f in findings if f.safety is Safety.SAFE]
    entries: dict[str, list[tuple[Compile, list[list[Reason]]]]] = {}  # per frame, read once
    verdicts = [(finding, _unmerged_by(finding, safe, frames, entries)) for finding in safe]
    for finding, others in verdicts:
        if others:
            names = ", ".join(f"`{source}`" for source in others[:3]) + (", ..." if len(others) > 3 else "")
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(
                f"unproven: each recompile it is about also failed a guard on {names}, which no safe fix "
                "covers: alone it merges no compile; `fix` tries it on a run with the other fixes"
            )


def _unmerged_by(
    finding: Finding,
    safe: list[Finding],
    frames: dict[str, Frame],
    entries: dict[str, list[tuple[Compile, list[list[Reason]]]]],
) -> list[str]:
    """What keeps every recompile ``finding`` is about (the sources of the guards no safe fix
    covers), or [] where it merges one, is about none, or is about a recompile-limit hit."""
    labels = dict.fromkeys(entry.get("frame") for entry in finding.covers)
    blocking: dict[str, None] = {}
    for frame in (frames.get(label) for label in labels if isinstance(label, str)):
        if frame is None:
            continue
        here = [f for f in safe if any(entry.get("frame") == frame.label for entry in f.covers)]

        def covered(reason: Reason, frame: Frame = frame, here: list[Finding] = here) -> bool:
            return any(covers_reason(f, frame.label, reason) for f in here)

        if frame.label not in entries:
            entries[frame.label] = [
                (c, [] if c.limit_hit else serving_entries(frame, c)) for c in frame.compiles if c.is_recompile
            ]
        for compile_, serving in entries[frame.label]:
            if compile_.limit_hit:
                if any(covers_reason(finding, frame.label, r) for r in compile_.reasons):
                    return []  # a limit hit's compiles are not accounted: leave it to the run
                continue
            for entry in serving:
                if not any(covers_reason(finding, frame.label, r) for r in entry):
                    continue
                kept = [r for r in entry if not covered(r)]
                if not kept:
                    return []  # this entry serves the call with the safe fixes: a compile merged
                blocking.update((r.source or r.kind, None) for r in kept)
    return list(blocking)
