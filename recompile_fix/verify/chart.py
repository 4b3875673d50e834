"""`verify --html FILE`: one self-contained page (inline SVG and CSS, no script, nothing fetched)
with, per frame, compiles and compile seconds before and after the fixes as bar charts, then the
table, the outputs comparison and what got worse. Readable offline, in any browser."""

from __future__ import annotations

from html import escape

from recompile_fix.report import short_path
from recompile_fix.verify.compare import FrameRow, Verification

__all__ = ["bar_chart", "render_html", "verification_body"]

_LABEL_W = 380
_BAR_W = 420
_VALUE_W = 70
_BAR_H = 11
_ROW_H = 2 * _BAR_H + 12
_TOP = 28

_CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1f2328; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.verdict-ok { color: #0a7d32; } .verdict-worse { color: #b00020; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg.chart text { font: 12px system-ui, sans-serif; fill: #1f2328; }
svg.chart .bar.before { fill: #9aa5b1; } svg.chart .bar.after { fill: #2b7de9; }
svg.chart .axis { stroke: #d0d7de; }
table { border-collapse: collapse; margin-top: 8px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eaeef2; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
td.worse { color: #b00020; font-weight: 600; } td.better { color: #0a7d32; }
code { background: #f6f8fa; padding: 1px 4px; border-radius: 4px; }
ul.regressions li { color: #b00020; }
"""


def _short(row: FrameRow, limit: int = 52) -> str:
    """The frame's name and where it is, short enough for the chart (the full label is its tooltip)."""
    line = row.line_before if row.line_before is not None else row.line_after
    name, file = row.name, short_path(row.file)
    if len(f"{name} ({file}:{line})") > limit:
        file = "\u2026/" + "/".join(file.replace("\\", "/").split("/")[-2:])
    if len(f"{name} ({file}:{line})") > limit:
        name = name[: max(limit - len(f" ({file}:{line})") - 1, 8)] + "\u2026"
    return f"{name} ({file}:{line})"


def _number(value: float, seconds: bool) -> str:
    return f"{value:.2f} s" if seconds else str(int(value))


def bar_chart(chart_id: str, title: str, frames: list[FrameRow], stat: str) -> str:
    """Grouped horizontal bars: for each frame, before (grey) over after (blue)."""
    seconds = stat == "compile_seconds"
    values = [(row, (row.before or {}).get(stat), (row.after or {}).get(stat)) for row in frames]
    top = max([v for _, b, a in values for v in (b, a) if v is not None] + [0]) or 1
    width = _LABEL_W + _BAR_W + _VALUE_W
    height = _TOP + _ROW_H * len(frames) + 8
    parts = [
        f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect class="legend before bar" x="{_LABEL_W}" y="6" width="12" height="12"/>'
        f'<text x="{_LABEL_W + 18}" y="16">before</text>'
        f'<rect class="legend after bar" x="{_LABEL_W + 80}" y="6" width="12" height="12"/>'
        f'<text x="{_LABEL_W + 98}" y="16">after the fixes</text>',
        f'<line class="axis" x1="{_LABEL_W}" y1="{_TOP - 4}" x2="{_LABEL_W}" y2="{height - 4}"/>',
    ]
    for i, (row, before, after) in enumerate(values):
        y = _TOP + i * _ROW_H
        label = escape(row.label)
        parts.append(f'<g class="frame" data-frame="{label}">')
        parts.append(
            f'<text x="{_LABEL_W - 8}" y="{y + _BAR_H + 4}" text-anchor="end">'
            f"<title>{label}</title>{escape(_short(row))}</text>"
        )
        for side, value, dy in (("before", before, 0), ("after", after, _BAR_H + 2)):
            shown = value or 0
            w = max(round(_BAR_W * shown / top, 1), 1 if shown else 0)
            text = "-" if value is None else _number(shown, seconds)
            parts.append(
                f'<rect class="bar {side}" data-side="{side}" data-value="{shown}" x="{_LABEL_W}" '
                f'y="{y + dy}" width="{w}" height="{_BAR_H}"><title>{label}: {side} {text}</title></rect>'
            )
            parts.append(f'<text class="value" x="{_LABEL_W + w + 4}" y="{y + dy + _BAR_H - 1}">{text}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _cell(before, after, fmt=str) -> str:
    b = "-" if before is None else fmt(before)
    a = "-" if after is None else fmt(after)
    css = ""
    if before is not None and after is not None and not isinstance(before, float):
        css = ' class="worse"' if after > before else (' class="better"' if after < before else "")
    return f"<td{css}>{escape(b)} &rarr; {escape(a)}</td>"


def verification_body(v: Verification, *, heading: str = "h1") -> str:
    """The page's body: the verdict, the fixes, what got worse, the charts and the tables."""
    verdict = "Verified: the fixes make nothing worse" if v.verified else "Worse after the fixes"
    if v.ran and v.after_exit not in (None, v.before_exit):  # fewer compiles of a partial run are no win
        verdict = f"The run with the fixes CRASHED (exit code {v.after_exit}): its numbers prove nothing"
    rows = []
    for r in v.frames:
        b, a = r.before or {}, r.after or {}
        rows.append(
            "<tr><td>"
            + escape(f"{r.name} ({short_path(r.file)}:{r.line_before if r.line_before is not None else r.line_after})")
            + "</td>"
            + "".join(_cell(b.get(s), a.get(s)) for s in ("compiles", "recompiles", "limit_hits"))
            + _cell(b.get("compile_seconds"), a.get("compile_seconds"), lambda s: f"{s:.2f}")
            + _cell(b.get("graph_breaks"), a.get("graph_breaks"))
            + f"<td>{escape(r.outputs or '')}</td></tr>"
        )
    outputs = "".join(
        f"<tr><td>{escape(o.label)}</td><td>{('close' if o.max_abs_diff else 'same') if o.same else 'only' if o.calls_before is None or o.calls_after is None else 'DIFFER'}</td>"
        f"<td>{o.calls_before if o.calls_before is not None else '-'} &rarr; "
        f"{o.calls_after if o.calls_after is not None else '-'}</td><td>{o.compared}</td>"
        f"<td>{'' if o.max_abs_diff is None else f'{o.max_abs_diff:.3g}'}</td><td>{escape(o.detail)}</td></tr>"
        for o in v.outputs
    )
    fixes = "".join(f"<li><code>{escape(f.describe(unsafe_fixes=True).splitlines()[0])}</code></li>" for f in v.fixes)
    regressions = "".join(f"<li>{escape(r)}</li>" for r in v.regressions)
    notes = "".join(f"<li>{escape(n)}</li>" for n in v.notes)
    return f"""<{heading} class="{"verdict-ok" if v.verified else "verdict-worse"}" id="verdict">{escape(verdict)}</{heading}>
<p>Ran <code>{escape(" ".join(v.command))}</code> on the tree as it was and on a copy with these fixes:</p>
<ul>{fixes}</ul>
{f'<h2>What got worse</h2><ul class="regressions">{regressions}</ul>' if regressions else ""}
<h2>Compiles per frame</h2>
{bar_chart("chart-compiles", "Compiles per frame, before and after the fixes", v.frames, "compiles")}
<h2>Compile seconds per frame</h2>
{bar_chart("chart-seconds", "Compile seconds per frame, before and after the fixes", v.frames, "compile_seconds")}
<h2>Per frame</h2>
<table id="frames">
<tr><th>frame</th><th>compiles</th><th>recompiles</th><th>limit hits</th><th>compile s</th><th>graph breaks</th><th>outputs</th></tr>
{"".join(rows)}
<tr><th>total</th>{"".join(_cell(v.total(s, "before"), v.total(s, "after")) for s in ("compiles", "recompiles", "limit_hits"))}{_cell(v.total("compile_seconds", "before"), v.total("compile_seconds", "after"), lambda s: f"{s:.2f}")}{_cell(v.total("graph_breaks", "before"), v.total("graph_breaks", "after"))}<td></td></tr>
</table>
<h2>Outputs of compiled callables</h2>
<p>First {v.calls} calls of each, compared {escape(v.tolerance.describe())}.</p>
<table id="outputs">
<tr><th>callable</th><th>outputs</th><th>calls</th><th>tensors</th><th>max abs diff</th><th></th></tr>
{outputs}
</table>
{f"<ul>{notes}</ul>" if notes else ""}
"""


def render_html(v: Verification) -> str:
    """The verification alone, as a page (`verify --html` adds the Profile's frames around it:
    ``recompile_fix.html_report``)."""
    verdict = "Verified: the fixes make nothing worse" if v.verified else "Worse after the fixes"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>recompile-fix verify: {escape(verdict)}</title>
<style>{_CSS}</style>
</head>
<body>
{verification_body(v)}</body>
</html>
"""
