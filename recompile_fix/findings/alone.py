"""Safe fixes that change nothing alone: a number's fix (a 0-d tensor) where a tensor's size
changed at every compile where the number did, and no safe fix marks that size. `apply` makes
the safe fixes together; without a mark, each of those compiles stays (a trial's sampler:
`cfg_scale` offered `[*]` changed only with the latent's size, 3 -> 3). Such a fix is unproven:
`fix` tries it with the unsafe mark on a run, and keeps both where the compiles merge."""

from __future__ import annotations

from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.profile.model import Compile, Frame, Profile

__all__ = ["unproven_where_sizes_change_too"]


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
    for source, entry in a.inputs.items():
        other = b.inputs.get(source) or {}
        if source in marked or entry.get("type") != "Tensor" or other.get("type") != "Tensor":
            continue
        shape, theirs = entry.get("shape"), other.get("shape")
        if not isinstance(shape, list) or not isinstance(theirs, list) or len(shape) != len(theirs):
            continue
        dynamic = {r.get("dim") for r in (a.dims or {}).get(source, []) if r.get("state") == "dynamic"}
        if any(x != y and d not in dynamic for d, (x, y) in enumerate(zip(shape, theirs))):
            return source
    return None
