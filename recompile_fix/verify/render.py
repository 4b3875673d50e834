"""The verification as text: the per-frame table (before -> after), the outputs, the verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recompile_fix.findings.finding import PROVEN, stands_in_for
from recompile_fix.verify.compare import Verification
from recompile_fix.verify.judge import kernel_rounding
from recompile_fix.verify.recorded import recorded_header, recorded_verdict

if TYPE_CHECKING:
    from recompile_fix.verify.fixpoint import FixPoint

__all__ = ["crashed", "frame_table", "render_fix", "render_text"]


def _arrow(b, a, fmt=str) -> str:
    return f"{'-' if b is None else fmt(b)} -> {'-' if a is None else fmt(a)}"


def crashed(v: Verification) -> bool:
    """Did the run with the fixes fail where the run without them did not?"""
    return v.ran and v.after_exit not in (None, v.before_exit)


def _total_label(v: Verification) -> str:
    return "total (after: CRASHED)" if crashed(v) else "total"


def frame_table(v: Verification) -> list[str]:
    header = ("frame", "compiles", "recompiles", "limit hits", "compile s", "graph breaks", "outputs")
    rows = []
    for r in v.frames:
        cells = [r.label]
        for stat in ("compiles", "recompiles", "limit_hits"):
            cells.append(_arrow(r.before and r.before[stat], r.after and r.after[stat]))
        cells.append(
            _arrow(
                r.before and r.before["compile_seconds"], r.after and r.after["compile_seconds"], lambda s: f"{s:.2f}"
            )
        )
        cells.append(_arrow(r.before and r.before["graph_breaks"], r.after and r.after["graph_breaks"]))
        cells.append(r.outputs or "")
        rows.append(cells)
    totals = [_total_label(v)] + [
        _arrow(v.total(s, "before"), v.total(s, "after")) for s in ("compiles", "recompiles", "limit_hits")
    ]
    totals.append(
        _arrow(v.total("compile_seconds", "before"), v.total("compile_seconds", "after"), lambda s: f"{s:.2f}")
    )
    totals.append(_arrow(v.total("graph_breaks", "before"), v.total("graph_breaks", "after")))
    outputs_same = sum(1 for o in v.outputs if o.same and not o.max_abs_diff)
    outputs_close = sum(1 for o in v.outputs if o.same and o.max_abs_diff)
    close = f", {outputs_close} close" if outputs_close else ""
    totals.append(f"{outputs_same}/{len(v.outputs)} same{close}" if v.outputs else "")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows + [totals])) for i in range(len(header))]

    def fmt(cells):
        return "  ".join([cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return [fmt(header), rule, *(fmt(r) for r in rows), rule, fmt(totals)]


def render_text(v: Verification) -> str:
    if not v.ran:
        return "Nothing to verify: no fixes are pending.\n"
    if v.against_recorded:
        lines = recorded_header(v)
    else:
        files = len({f.file for f in v.fixes})
        lines = [
            f"Ran `{' '.join(v.command)}` on your tree and on a copy with {len(v.fixes)} fix(es) in {files} file(s):",
            "",
        ]
        lines.extend(f.describe(unsafe_fixes=True).split("\n", 1)[0] for f in v.fixes)
        lines.append("")
    if crashed(v):
        lines.append(
            f"The run with the fixes CRASHED (exit code {v.after_exit}): the numbers after the fixes are "
            "of a partial run and prove nothing."
        )
        lines.append("")
    lines.extend(frame_table(v))
    lines.append("")
    if not v.against_recorded:
        lines.append(f"Outputs of compiled callables (first {v.calls} calls each, compared {v.tolerance.describe()}):")
    for o in v.outputs:
        calls = _arrow(o.calls_before, o.calls_after)
        diff = f", max abs diff {o.max_abs_diff:.3g}" if o.max_abs_diff is not None else ""
        # A callable compiled on one side only (RF007 compiles the blocks instead of the model)
        # has nothing to compare: "only", not a difference.
        one_sided = o.calls_before is None or o.calls_after is None
        status = ("close " if o.max_abs_diff else "same  ") if o.same else "only  " if one_sided else "DIFFER"
        detail = f": {o.detail}" if o.detail else ""
        nan = f" ({o.all_nan} NaN everywhere in both runs)" if o.all_nan else ""
        lines.append(f"  {status} {o.label}: calls {calls}, {o.compared} tensors{nan}{diff}{detail}")
    if not v.outputs and not v.against_recorded:
        lines.append("  (no compiled callable was recorded)")
    for note in v.notes:
        lines.append(f"note: {note}")
    lines.append("")
    if v.verified and v.against_recorded:
        lines.append(recorded_verdict(v))
    elif v.verified:
        stance = " and nothing compiled after warm-up (fail_on_recompile)" if v.fail_on_recompile else ""
        counts = (
            f"compiles {v.total('compiles', 'before')} -> {v.total('compiles', 'after')}, "
            f"recompiles {v.total('recompiles', 'before')} -> {v.total('recompiles', 'after')}, "
            f"{outputs_verdict(v)}{stance}"
        )
        no_fewer = all(v.total(what, "after") >= v.total(what, "before") for what in ("compiles", "recompiles"))
        # A compile-time fix (RF004, RF007) keeps the compiles on purpose: its gain is elsewhere.
        if no_fewer and not {"same_compiles", "regional"} & v.allows and not v.fail_on_recompile:
            # Nothing worse, and nothing fewer: the recompiles' reasons changed (torch names the
            # first guard that fails; a fix can uncover the next). Not "Verified" (a trial's word).
            lines.append(
                f"Nothing worse, but no fewer compiles: {counts}; the recompiles' reasons changed "
                "(a fix can uncover a guard torch did not name: `recompile-fix fix` goes on from there)."
            )
        else:
            lines.append(f"Verified: {counts}.")
    elif v.no_op:
        why = v.regressions[-1]  # "changes nothing on this program: ...", said of one fix elsewhere
        lines.append(
            f"Not kept: the fixes {why.replace('changes', 'change', 1) if why.startswith('changes') else why}."
        )
    else:
        lines.append("Worse than the recorded run:" if v.against_recorded else "Worse after the fixes:")
        lines.extend(f"  - {r}" for r in v.regressions)
    return "\n".join(lines) + "\n"


def outputs_verdict(v: Verification) -> str:
    """What the comparison of outputs showed, worded for the tensors really compared."""
    if v.outputs_compared:
        close = [o for o in v.outputs if o.same and o.max_abs_diff]
        if close:
            worst = max(o.max_abs_diff or 0.0 for o in close)
            return f"outputs equal {v.tolerance.describe()} (not bit for bit: max abs diff {worst:.3g})"
        return "outputs equal"
    if v.outputs_all_nan:
        return f"no outputs compared (each of the {v.outputs_all_nan} tensors was NaN everywhere in both runs)"
    return "no outputs compared (no compiled callable returned a tensor)"


def render_fix(result: FixPoint) -> str:
    """`recompile-fix fix`: each round (kept, dropped and why), the per-frame table of the first
    run against the last (as `verify` prints it), each call site's compiles, and every
    recompile that remains with its reasons and why it stays."""
    lines = []
    # Outputs only within a tolerance (--unsafe-fixes let an unproven fix round): its `[*]` would
    # promise the bits, so it keeps its `[unsafe fix]`.
    rounded = result.verification is not None and result.verification.rounded
    for r in result.rounds:
        lines.append(f"Round {r.number}: tried {len(r.tried)} fix(es), kept {len(r.kept)}, dropped {len(r.dropped)}")
        for f in r.kept:
            if f.unproven and rounded and kernel_rounding(f):
                proven = (
                    f"  ({PROVEN}: outputs within assert_close, not bit for bit: {(f.tolerance or {}).get('why')}, "
                    "the program's arithmetic unchanged)"
                )
                lines.append("  kept     " + f.describe(unsafe_fixes=True).split("\n", 1)[0] + proven)
                continue
            if f.unproven and rounded:
                proven = "  (kept with --unsafe-fixes: outputs equal within its tolerance, not bit for bit)"
                lines.append("  kept     " + f.describe().split("\n", 1)[0] + proven)
                continue
            proven = f"  ({PROVEN}: the rule could not tell statically)" if f.unproven else ""
            lines.append("  kept     " + f.describe(unsafe_fixes=True).split("\n", 1)[0] + proven)
        for finding, why in r.dropped:
            lines.append("  dropped  " + finding.describe().split("\n", 1)[0])
            lines.extend(f"           - {w}" for w in why[:3])
            replaced = any(stands_in_for(k, finding) for k in result.kept)  # its bit-exact fallback was kept
            if (
                finding.unproven
                and finding.tolerance is not None
                and not kernel_rounding(finding)  # held to that tolerance already
                and not replaced
                and not result.unsafe_fixes  # tried with that tolerance already
                and any(w.startswith("outputs differ") for w in why)
            ):
                lines.append(
                    "           - its rule allows rounding there: `recompile-fix fix --unsafe-fixes` keeps it if the "
                    "outputs stay within that tolerance"
                )
    if result.converged:
        done = len(result.rounds)
        if done:
            lines.append(f"Converged after {done} round(s): nothing new to try.")
        else:
            lines.append("No safe fix to try." if result.not_tried else "Nothing to fix.")
    else:
        lines.append(
            f"Stopped after {len(result.rounds)} round(s) (--rounds) with {len(result.pending)} fix(es) "
            "still to try: run `recompile-fix fix` again."
        )
    if result.not_tried:
        lines.append("Not tried: trade-off fixes (they change how the program runs by design; `--unsafe-fixes`):")
        for finding, about in result.not_tried:
            gives = f"about {about} recompile(s) of the last run" if about else "no recompile of the last run"
            lines.append(f"  {finding.describe().split(chr(10), 1)[0]}")
            lines.append(f"      would address: {gives}" + (f"; {finding.notes[-1]}" if finding.notes else ""))
    lines.append("")
    if result.verification is not None:
        lines.extend(frame_table(result.verification))
        lines.append("")
    if result.sites:
        counts = [f"{s.before} -> {s.after}" for s in result.sites]
        width = max(len(c) for c in counts)
        lines.append("Compiles per call site (first run -> last):")
        frame = None
        for site, count in zip(result.sites, counts):
            if site.frame != frame:
                frame = site.frame
                lines.append(f"  {frame}")
            lines.append(f"    {count.rjust(width)}  {site.site}")
        lines.append("")
    if result.remaining:
        lines.append("Recompiles that remain, and why they stay:")
        for rest in result.remaining:
            lines.append(f"  {rest.frame}, compile {rest.compile_id}, called at {rest.site}: {rest.reasons}")
            lines.append(f"      stays: {rest.why}")
    elif result.last.profile.frames:
        lines.append("No recompile remains.")
    for note in result.verification.notes if result.verification else []:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"
