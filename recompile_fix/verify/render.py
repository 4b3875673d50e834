"""The verification as text: the per-frame table (before -> after), the outputs, the verdict."""

from __future__ import annotations

from recompile_fix.verify.compare import Verification

__all__ = ["frame_table", "render_text"]


def _arrow(b, a, fmt=str) -> str:
    return f"{'-' if b is None else fmt(b)} -> {'-' if a is None else fmt(a)}"


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
    totals = ["total"] + [
        _arrow(v.total(s, "before"), v.total(s, "after")) for s in ("compiles", "recompiles", "limit_hits")
    ]
    totals.append(
        _arrow(v.total("compile_seconds", "before"), v.total("compile_seconds", "after"), lambda s: f"{s:.2f}")
    )
    totals.append(_arrow(v.total("graph_breaks", "before"), v.total("graph_breaks", "after")))
    outputs_same = sum(1 for o in v.outputs if o.same)
    totals.append(f"{outputs_same}/{len(v.outputs)} same" if v.outputs else "")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows + [totals])) for i in range(len(header))]

    def fmt(cells):
        return "  ".join([cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return [fmt(header), rule, *(fmt(r) for r in rows), rule, fmt(totals)]


def render_text(v: Verification) -> str:
    if not v.ran:
        return "Nothing to verify: no fixes are pending.\n"
    files = len({f.file for f in v.fixes})
    lines = [
        f"Ran `{' '.join(v.command)}` on your tree and on a copy with {len(v.fixes)} fix(es) in {files} file(s):",
        "",
    ]
    lines.extend(f.describe(unsafe_fixes=True).split("\n", 1)[0] for f in v.fixes)
    lines.append("")
    lines.extend(frame_table(v))
    lines.append("")
    lines.append(f"Outputs of compiled callables (first {v.calls} calls each, compared {v.tolerance.describe()}):")
    for o in v.outputs:
        calls = _arrow(o.calls_before, o.calls_after)
        diff = f", max abs diff {o.max_abs_diff:.3g}" if o.max_abs_diff is not None else ""
        status = "same  " if o.same else "DIFFER"
        detail = f": {o.detail}" if o.detail else ""
        lines.append(f"  {status} {o.label}: calls {calls}, {o.compared} tensors{diff}{detail}")
    if not v.outputs:
        lines.append("  (no compiled callable was recorded)")
    for note in v.notes:
        lines.append(f"note: {note}")
    lines.append("")
    if v.verified:
        stance = " and nothing compiled after warm-up (fail_on_recompile)" if v.fail_on_recompile else ""
        lines.append(
            f"Verified: compiles {v.total('compiles', 'before')} -> {v.total('compiles', 'after')}, "
            f"recompiles {v.total('recompiles', 'before')} -> {v.total('recompiles', 'after')}, "
            f"outputs equal{stance}."
        )
    else:
        lines.append("Worse after the fixes:")
        lines.extend(f"  - {r}" for r in v.regressions)
    return "\n".join(lines) + "\n"
