"""`report --html FILE` (and `verify --html FILE`): one self-contained page, readable offline in
any browser (inline CSS and SVG; no script, nothing fetched).

Frames in order of compile seconds, each with what tlparse shows per compile (its id, seconds,
the guard that failed, the arguments' shapes, the call site) and what we add: the typed reasons
and how often each came, the call sites and how many compiles each caused, the graph breaks,
and the Finding with the diff of its fix. With a verification (`verify --html`), the verdict
and the before/after bars come first, and each frame shows its own before/after bars. The page
ends with the accounting (findings.accounting): where each recompile ends, the counts adding up
to the Profile's recompiles. Frames are named by what the user compiled (``compiled_name``: the
module's class, or the function), the library decorator that torch compiled beneath.
"""

from __future__ import annotations

import re
from collections import Counter
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from recompile_fix.edits.edit import apply_edits, unified_diff
from recompile_fix.findings.accounting import EXPECTED, FIX, Accounting, Outcome, account
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.pipeline.fix import FindingFix
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.model import Compile, Frame, Location, Profile
from recompile_fix.profile.reason_classes import reason_id
from recompile_fix.reason_docs import reason_url
from recompile_fix.report import grouped_reasons, reason_phrase, short_path
from recompile_fix.rule_docs import rule_url

if TYPE_CHECKING:
    from recompile_fix.verify.compare import FrameRow, Verification

__all__ = ["code_html", "compiled_name", "render_page"]

_CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328;
       background: #f6f8fa; }
main { max-width: 1160px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 0; }
h3 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: #59636e; margin: 16px 0 6px; }
code, pre { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { background: #eff2f5; padding: 1px 4px; border-radius: 4px; }
a { color: #0b63ce; }
.muted { color: #59636e; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 16px 18px; margin: 16px 0; }
.totals { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0 0; }
.total { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 8px 14px; min-width: 120px; }
.total b { display: block; font-size: 20px; }
.total.bad b { color: #b00020; } .total.good b { color: #0a7d32; }
.stats { margin: 4px 0 0; color: #59636e; }
.stats b { color: #1f2328; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eaeef2; text-align: left; vertical-align: top; }
th { font-weight: 600; color: #59636e; font-size: 12.5px; }
td.n, th.n { text-align: right; white-space: nowrap; width: 1%; }
td.guard { word-break: break-word; }
.kind { display: inline-block; font-size: 12px; padding: 0 6px; border-radius: 10px; background: #ddf4ff;
        color: #0550ae; white-space: nowrap; }
.kind.limit_hit { background: #ffebe9; color: #b00020; }
.badge { display: inline-block; font-size: 12px; font-weight: 600; padding: 1px 8px; border-radius: 10px;
         white-space: nowrap; }
.badge.safe { background: #dafbe1; color: #116329; } .badge.unsafe { background: #fff8c5; color: #7d4e00; }
.badge.none { background: #eaeef2; color: #59636e; }
.finding { border-left: 3px solid #0b63ce; padding: 2px 0 2px 12px; margin: 8px 0 14px; }
.finding.none { border-left-color: #afb8c1; }
.finding ul { margin: 4px 0; padding-left: 20px; }
pre.diff { background: #f6f8fa; border: 1px solid #eaeef2; border-radius: 6px; padding: 8px 0; margin: 6px 0;
           overflow-x: auto; white-space: pre; }
pre.diff span { display: block; padding: 0 12px; }
pre.diff .add { background: #dafbe1; } pre.diff .del { background: #ffebe9; } pre.diff .hunk { color: #8250df; }
pre.diff .file { color: #59636e; }
details summary { cursor: pointer; color: #0b63ce; margin: 6px 0; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg.chart text { font: 12px system-ui, sans-serif; fill: #1f2328; }
svg.chart .bar.seconds { fill: #2b7de9; } svg.chart .bar.before { fill: #9aa5b1; } svg.chart .bar.after { fill: #2b7de9; }
svg.chart .axis { stroke: #d0d7de; }
.verdict-ok { color: #0a7d32; } .verdict-worse { color: #b00020; }
.compact td { padding: 2px 8px; }
.verification table { width: auto; }
.verification td, .verification th { text-align: right; white-space: nowrap; }
.verification td:first-child, .verification th:first-child { text-align: left; white-space: normal;
  word-break: break-word; }
.verification li code { white-space: normal; }
td.worse { color: #b00020; font-weight: 600; } td.better { color: #0a7d32; }
ul.regressions li { color: #b00020; }
.via { font-size: 12.5px; font-weight: normal; color: #59636e; margin: 2px 0 0; }
.timing-note { font-size: 12.5px; margin: 8px 0 0; }
.badge.fixed { background: #dafbe1; color: #116329; } .badge.fixable { background: #ddf4ff; color: #0550ae; }
.badge.expected { background: #eaeef2; color: #1f2328; } .badge.no-fix, .badge.no-rule { background: #fff8c5; color: #7d4e00; }
table.accounting td { word-break: break-word; } table.accounting td.compiled { white-space: nowrap; width: 1%; }
@media (max-width: 720px) {
  main { padding: 12px 10px 32px; } .card { padding: 12px; }
  table { display: block; overflow-x: auto; } td code, li code, p code { word-break: break-word; }
  .total { min-width: 0; flex: 1 1 40%; } table.accounting td.compiled { white-space: normal; }
}
"""

_LABEL_W, _BAR_W, _VALUE_W, _BAR_H, _GAP = 340, 550, 190, 14, 6

_SINGLE_RUN = (
    "Compile seconds are of a single run of the program: they vary from run to run (machine load, "
    "caches), so small differences are noise; the counts of compiles are exact."
)
_CODE = re.compile(r"`([^`\n]+)`")


def code_html(text: str) -> str:
    """Plain text with `backticks` as HTML: escaped first, then each `span` as <code>."""
    return _CODE.sub(r"<code>\1</code>", escape(text))


_RESUME = re.compile(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)$")


def compiled_name(frame: Frame) -> tuple[str, str]:
    """(what the user compiled, what torch compiled beneath it, or ""): the class of the module
    the frame's first argument is (``DistilBertForSequenceClassification``, "via transformers'
    `wrapper`" where the compiled code is the library's decorator), the function a graph break
    resumed, or the frame's own name."""
    library = _library(frame.file)
    first = None
    if frame.signature and frame.signature.get("positional"):
        first = frame.signature["positional"][0]
    module = held_in = None
    for source in [s for s in (first, "self", "args[0]") if s]:
        for compile_ in frame.compiles:
            entry = compile_.inputs.get(source)
            if isinstance(entry, dict) and entry.get("type") == "Module":
                qualname = entry.get("qualname") or entry.get("class")
                if isinstance(qualname, str) and qualname:
                    module, held_in = qualname, source
                    break
        if module:
            break
    # A decorator's code (a library's, or one passing *args/**kwargs on) stands for the module it
    # wraps; the user's own function that takes a model is named as itself.
    passes_on = bool(frame.signature and (frame.signature.get("varargs") or frame.signature.get("varkw")))
    decorator = bool(library) or passes_on or held_in == "args[0]"
    resumed = _RESUME.match(frame.name)
    if module is not None and frame.name in ("forward", "__call__"):
        return f"{module}.{frame.name}", ""
    if module is not None and decorator:
        owner = f"{library}'" if library else f"{short_path(frame.file)}:{frame.first_line}"
        return module, f"via {owner} `{frame.name}`" if library else f"via `{frame.name}` ({owner})"
    if resumed is not None:
        return resumed.group(1), f"resumed after a graph break at line {resumed.group(2)}"
    return frame.name, ""


def _library(path: str) -> str:
    """The package a library file belongs to (``transformers``), or "" for the project's own."""
    shown = short_path(path)
    return shown.split("/", 1)[0] if shown != path and "/" in shown else ""


def render_page(
    profile: Profile,
    findings: list[Finding],
    fixes: list[FindingFix | None] | None = None,
    *,
    root: str | Path = ".",
    verification: Verification | None = None,
    verification_body: str = "",
    accounting: Accounting | None = None,
) -> str:
    """The page. ``fixes``: each Finding's own fix (``pipeline.fix.finding_fixes``), shown as a
    diff; ``verification`` (and its sections, ``verification_body``): `verify --html`;
    ``accounting``: where each recompile ends (default: ``account(profile, findings)``)."""
    fixes = fixes if fixes is not None else [None] * len(findings)
    accounting = accounting if accounting is not None else account(profile, findings)
    lines = _SourceLines(Path(root), profile)
    by_frame: dict[str, list[tuple[Finding, FindingFix | None]]] = {}
    unattached: list[tuple[Finding, FindingFix | None]] = []
    labels = {_evidence_label(frame): frame for frame in profile.frames}
    for finding, fix in zip(findings, fixes):
        frame_label = finding.evidence.get("frame")
        if isinstance(frame_label, str) and frame_label in labels:
            by_frame.setdefault(frame_label, []).append((finding, fix))
        else:
            unattached.append((finding, fix))
    rows = _verification_rows(profile, verification)
    ordered = sorted(profile.frames, key=lambda f: (-f.compile_seconds, -len(f.compiles), f.file, f.first_line))
    detailed = [f for f in ordered if _interesting(f) or _evidence_label(f) in by_frame]
    quiet = [f for f in ordered if f not in detailed]

    title = "recompile-fix verify" if verification is not None else "recompile-fix report"
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}: {escape(' '.join(profile.command))}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n",
        _header(profile, findings, title),
    ]
    if verification_body:
        parts.append(f'<section class="card verification" id="verification">{verification_body}</section>\n')
    if profile.frames:
        parts.append(_overview(ordered))
    else:
        parts.append(f'<section class="card"><p>{escape(profile.nothing_compiled())}</p></section>\n')
    for number, frame in enumerate(detailed, 1):
        parts.append(
            _frame_section(
                number, frame, by_frame.get(_evidence_label(frame), []), lines, rows.get(id(frame)), verification
            )
        )
    if quiet:
        parts.append(_quiet_frames(quiet))
    if unattached:
        parts.append('<section class="card" id="other-findings"><h2>Other findings</h2>\n')
        parts.extend(_finding_block(f, fix) for f, fix in unattached)
        parts.append("</section>\n")
    if profile.frames:
        parts.append(_accounting_section(accounting, fixed=_fixed_frames(rows, verification)))
    parts.append("</main>\n</body>\n</html>\n")
    return "".join(parts)


# -- pieces ----------------------------------------------------------------------------------


def _evidence_label(frame: Frame) -> str:
    """How a Finding's evidence names its frame (``findings.finding.frame_evidence``)."""
    return f"{frame.name} ({frame.file}:{frame.first_line})"


def _label(frame: Frame) -> str:
    return f"{frame.name} ({short_path(frame.file)}:{frame.first_line})"


def _shown_label(frame: Frame) -> str:
    """The frame as the page shows it: what the user compiled, and where torch's frame is."""
    title, via = compiled_name(frame)
    where = f"{short_path(frame.file)}:{frame.first_line}"
    return f"{title} ({where})" if not via.startswith("via") else f"{title} ({frame.name}, {where})"


def _interesting(frame: Frame) -> bool:
    return len(frame.compiles) > 1 or bool(frame.graph_breaks) or frame.limit_hits > 0


def _anchor(frame: Frame) -> str:
    return "frame-" + "".join(c if c.isalnum() else "-" for c in f"{frame.name}-{frame.first_line}")[:80]


def _header(profile: Profile, findings: list[Finding], title: str) -> str:
    recompiles = sum(f.recompiles for f in profile.frames)
    seconds = sum(f.compile_seconds for f in profile.frames)
    limit_hits = sum(f.limit_hits for f in profile.frames)
    breaks = sum(b.count for f in profile.frames for b in f.graph_breaks)
    fixable = sum(1 for f in findings if f.safety is Safety.SAFE)
    unsafe = sum(1 for f in findings if f.safety is Safety.UNSAFE)
    facts = [f"torch {escape(profile.torch_version or '?')}"]
    if profile.exit_code is not None:
        facts.append(f"exit code {profile.exit_code}")
    if profile.backend:
        facts.append(f"backend {escape(profile.backend)}")

    def total(value: str, what: str, css: str = "") -> str:
        return f'<div class="total {css}"><b>{value}</b>{what}</div>'

    return (
        f"<header>\n<h1>{title}</h1>\n"
        f'<p class="muted"><code>{escape(" ".join(profile.command))}</code> &middot; {" &middot; ".join(facts)}</p>\n'
        '<div class="totals" id="totals">'
        + total(str(len(profile.frames)), "frames compiled")
        + total(str(profile.total_compiles), "compiles")
        + total(str(recompiles), "recompiles", "bad" if recompiles else "good")
        + total(f"{seconds:.2f} s", "compiling")
        + total(str(limit_hits), "recompile-limit hits", "bad" if limit_hits else "")
        + total(str(breaks), "graph breaks")
        + total(str(fixable), "safe fixes" + (f" (+{unsafe} unsafe)" if unsafe else ""), "good" if fixable else "")
        + "</div>\n"
        + (f'<p class="muted timing-note" id="timing-note">{_SINGLE_RUN}</p>\n' if profile.frames else "")
        + "</header>\n"
    )


def _overview(frames: list[Frame], limit: int = 30) -> str:
    """Frames by compile seconds: one bar each, linked to the frame's section."""
    shown = frames[:limit]
    top = max((f.compile_seconds for f in shown), default=0) or 1
    width = _LABEL_W + _BAR_W + _VALUE_W
    row = _BAR_H + _GAP
    height = 8 + row * len(shown)
    svg = [
        f'<svg id="chart-frames" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" aria-label="Compile seconds per frame">',
        f'<line class="axis" x1="{_LABEL_W}" y1="2" x2="{_LABEL_W}" y2="{height - 2}"/>',
    ]
    for i, frame in enumerate(shown):
        y = 4 + i * row
        w = max(round(_BAR_W * frame.compile_seconds / top, 1), 1)
        label = _label(frame)
        shown_as = _shown_label(frame)
        link = f"#{_anchor(frame)}" if _interesting(frame) else "#quiet-frames"
        value = f"{frame.compile_seconds:.2f} s, {len(frame.compiles)} compile{'s' if len(frame.compiles) != 1 else ''}"
        svg.append(
            f'<a href="{link}"><g class="frame" data-frame="{escape(label)}" data-seconds="{frame.compile_seconds:.4f}">'
            f'<text x="{_LABEL_W - 8}" y="{y + _BAR_H - 3}" text-anchor="end"><title>{escape(shown_as)}</title>'
            f"{escape(_ellipsis(shown_as, 46))}</text>"
            f'<rect class="bar seconds" x="{_LABEL_W}" y="{y}" width="{w}" height="{_BAR_H}"/>'
            f'<text class="value" x="{_LABEL_W + w + 6}" y="{y + _BAR_H - 3}">{value}</text></g></a>'
        )
    svg.append("</svg>")
    more = f'<p class="muted">{len(frames) - limit} more frames below.</p>' if len(frames) > limit else ""
    return (
        '<section class="card" id="overview"><h2>Frames by compile seconds <span class="muted">(one run)</span></h2>\n'
        f"{''.join(svg)}\n{more}</section>\n"
    )


def _ellipsis(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _frame_section(
    number: int,
    frame: Frame,
    findings: list[tuple[Finding, FindingFix | None]],
    lines: _SourceLines,
    row: FrameRow | None,
    verification: Verification | None,
) -> str:
    breaks = sum(b.count for b in frame.graph_breaks)
    title, via = compiled_name(frame)
    stats = (
        f"<b>{len(frame.compiles)}</b> compiles &middot; <b>{frame.recompiles}</b> recompiles &middot; "
        f'<b title="one run: noisy">{frame.compile_seconds:.2f} s</b> compiling (one run) &middot; '
        f"<b>{frame.limit_hits}</b> limit hits &middot; "
        f"<b>{breaks}</b> graph breaks"
    )
    parts = [
        f'<section class="card frame" id="{_anchor(frame)}" data-frame="{escape(_label(frame))}" '
        f'data-seconds="{frame.compile_seconds:.4f}">\n'
        f'<h2>{number}. <code>{escape(title)}</code> <span class="muted">{escape(short_path(frame.file))}:'
        f"{frame.first_line}</span></h2>\n"
        + (f'<p class="via">{code_html(via)}</p>\n' if via else "")
        + f'<p class="stats">{stats}</p>\n'
    ]
    if verification is not None:
        parts.append(_before_after(frame, row))
    reasons = grouped_reasons(frame)
    if reasons:
        kinds = _reason_kinds(frame)
        parts.append(
            '<h3>Why it compiled again</h3>\n<table class="reasons"><tr><th class="n">compiles</th><th>reason</th><th>example</th></tr>'
        )
        for phrase, count, example in reasons:
            kind = kinds.get(phrase, "")
            parts.append(
                f'<tr><td class="n">{count}</td><td><span class="kind {escape(kind)}">{escape(kind or "reason")}</span> '
                f"{code_html(phrase)}</td><td><code>{escape(example)}</code></td></tr>"
                if example
                else f'<tr><td class="n">{count}</td><td><span class="kind {escape(kind)}">{escape(kind or "reason")}</span> '
                f"{code_html(phrase)}</td><td></td></tr>"
            )
        parts.append("</table>\n")
    sites = Counter(_site_key(c.call_site) for c in frame.compiles if c.call_site is not None)
    if sites:
        parts.append(
            '<h3>Call sites</h3>\n<table class="sites"><tr><th class="n">compiles</th><th>where</th><th>code</th></tr>'
        )
        for (file, line, function), count in sites.most_common():
            code = lines.line(file, line)
            parts.append(
                f'<tr><td class="n">{count}</td><td>{escape(short_path(file))}:{line}'
                f"{f' in <code>{escape(function)}</code>' if function else ''}</td>"
                f"<td><code>{escape(code.strip())}</code></td></tr>"
            )
        parts.append("</table>\n")
    if frame.graph_breaks:
        parts.append(
            '<h3>Graph breaks</h3>\n<table class="breaks"><tr><th class="n">count</th><th>where</th><th>why</th></tr>'
        )
        for gb in frame.graph_breaks:
            parts.append(
                f'<tr><td class="n">{gb.count}</td><td>{escape(short_path(gb.location.file))}:{gb.location.line}</td>'
                f'<td class="guard">{code_html(gb.reason)}</td></tr>'
            )
        parts.append("</table>\n")
    if findings:
        parts.append("<h3>Fix</h3>\n")
        parts.extend(_finding_block(f, fix) for f, fix in findings)
    parts.append(_compiles_table(frame))
    parts.append("</section>\n")
    return "".join(parts)


def _reason_kinds(frame: Frame) -> dict[str, str]:
    """Each grouped reason's phrase -> its kind (``size_mismatch``), for the tag shown beside it."""
    return {reason_phrase(c.reasons[0]): c.reasons[0].kind for c in frame.compiles if c.reasons}


def _site_key(location: Location | None) -> tuple[str, int, str]:
    assert location is not None
    return (location.file, location.line, location.function or "")


def _compiles_table(frame: Frame) -> str:
    """tlparse's view: every compile, its id, seconds, failed guard, arguments and call site."""
    rows = []
    for c in frame.compiles:
        rows.append(
            f'<tr><td class="n"><code>{escape(c.id)}</code></td>'
            f'<td class="n">{(c.seconds.get("dynamo") or 0):.2f} s</td>'
            f'<td class="guard">{_guard_cell(c)}</td><td>{escape(_inputs(c))}</td>'
            f"<td>{escape(_where(c.call_site))}</td></tr>"
        )
    return (
        f"<details><summary>All {len(frame.compiles)} compiles (id, seconds, the guard that failed, "
        "arguments, call site)</summary>\n"
        '<table class="compiles compact"><tr><th class="n">id</th><th class="n">seconds</th><th>guard that failed</th>'
        "<th>arguments</th><th>called from</th></tr>" + "".join(rows) + "</table>\n</details>\n"
    )


def _guard_cell(c: Compile) -> str:
    if c.limit_hit:
        return '<span class="kind limit_hit">limit_hit</span> recompile limit hit: runs eagerly from here on'
    if not c.reasons:
        return '<span class="muted">first compile</span>'
    first = c.reasons[0].text.split("\n", 1)[0]
    return f"<code>{escape(first)}</code>"


def _inputs(c: Compile) -> str:
    shown = []
    for name, entry in c.inputs.items():
        if entry.get("type") == "Tensor" and "shape" in entry:
            shown.append(f"{name}: {list(entry['shape'])}")
        elif "value" in entry:
            shown.append(f"{name} = {entry['value']!r}")
    return ", ".join(shown)


def _where(location: Location | None) -> str:
    return "" if location is None else f"{short_path(location.file)}:{location.line}"


def _finding_block(finding: Finding, fix: FindingFix | None) -> str:
    badge = {
        Safety.SAFE: '<span class="badge safe">[*] safe fix</span>',
        Safety.UNSAFE: '<span class="badge unsafe">unsafe fix (--unsafe-fixes)</span>',
        Safety.NONE: '<span class="badge none">no fix</span>',
    }[finding.safety]
    loc = finding.location
    parts = [
        f'<div class="finding {finding.safety.value}" data-rule="{escape(finding.rule)}">'
        f'<p>{badge} <a href="{escape(rule_url(finding.rule))}"><b>{escape(finding.rule)}</b></a> '
        f"{escape(finding.file)}:{loc.line}:{(loc.col or 0) + 1}: {code_html(finding.message)}</p>"
    ]
    if finding.notes:
        parts.append("<ul>" + "".join(f"<li>{code_html(n)}</li>" for n in finding.notes) + "</ul>")
    if fix is not None:
        parts.append(_diff_block(unified_diff(finding.file, fix.text, apply_edits(fix.text, fix.edits))))
    parts.append("</div>\n")
    return "".join(parts)


def _diff_block(diff: str) -> str:
    spans = []
    for line in diff.splitlines():
        css = (
            "file"
            if line.startswith(("--- ", "+++ "))
            else "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else "ctx"
        )
        spans.append(f'<span class="{css}">{escape(line) or " "}</span>')
    return f'<pre class="diff">{"".join(spans)}</pre>'


def _quiet_frames(frames: list[Frame]) -> str:
    rows = "".join(
        f"<tr><td>{escape(_shown_label(f))}</td><td class='n'>{f.compile_seconds:.2f} s</td></tr>" for f in frames
    )
    return (
        f'<section class="card" id="quiet-frames"><h2>Compiled once, no graph break ({len(frames)})</h2>\n'
        f'<table class="compact"><tr><th>frame</th><th class="n">compiling</th></tr>{rows}</table></section>\n'
    )


# -- accounting ------------------------------------------------------------------------------


def _fixed_frames(rows: dict[int, FrameRow], verification: Verification | None) -> set[int]:
    """The frames (ids) a verification that kept the fixes shows recompiling less after them."""
    if verification is None or not verification.verified:
        return set()
    fixed = set()
    for frame_id, row in rows.items():
        before = (row.before or {}).get("recompiles")
        after = (row.after or {}).get("recompiles")
        if before is not None and after is not None and after < before:
            fixed.add(frame_id)
    return fixed


def _ending(outcome: Outcome, fixed: set[int]) -> tuple[str, str]:
    """(css class, words) for where a recompile ends: a fix is "fixed" where a verification run
    shows its frame recompiling less, else "fixable"."""
    if outcome.category == FIX:
        return ("fixed", "fixed") if id(outcome.frame) in fixed else ("fixable", "fixable")
    if outcome.category == EXPECTED:
        return "expected", "expected"
    return ("no-fix", "no fix") if outcome.finding is not None else ("no-rule", "no rule")


def _why_html(outcome: Outcome) -> str:
    finding = outcome.finding
    if finding is not None:
        return (
            f'<a href="{escape(rule_url(finding.rule))}"><b>{escape(finding.rule)}</b></a> '
            f'{code_html(finding.message)} <span class="muted">({escape(finding.file)}:{finding.location.line})</span>'
        )
    why = code_html(outcome.why)
    if outcome.category != EXPECTED and outcome.reason is not None:
        rid = reason_id(outcome.reason.kind)
        why = f'<a class="reason-id" href="{escape(reason_url(rid))}"><b>{rid}</b></a> {why}'
    return why


def _accounting_section(accounting: Accounting, *, fixed: set[int]) -> str:
    """Where each recompile ends, grouped (frame, ending, why) with counts that add up to the
    Profile's recompiles."""
    groups: Counter[tuple[str, str, str, str, str]] = Counter()
    for outcome in accounting.outcomes:
        title, via = compiled_name(outcome.frame)
        css, words = _ending(outcome, fixed)
        groups[(title, via, css, words, _why_html(outcome))] += 1
    counts: Counter[str] = Counter()
    for (_, _, css, _, _), n in groups.items():
        counts[css] += n
    rows = []
    order = {"fixed": 0, "fixable": 0, "no-fix": 1, "no-rule": 2, "expected": 3}
    for (title, via, css, words, why), n in sorted(groups.items(), key=lambda item: (order[item[0][2]], -item[1])):
        beneath = f'<div class="via">{code_html(via)}</div>' if via else ""
        rows.append(
            f'<tr class="outcome" data-category="{css}" data-count="{n}"><td class="n">{n}</td>'
            f'<td class="compiled"><code>{escape(title)}</code>{beneath}</td>'
            f'<td><span class="badge {css}">{words}</span></td><td>{why}</td></tr>'
        )
    summary = ", ".join(
        f"{counts[css]} {words}"
        for css, words in (
            ("fixed", "fixed"),
            ("fixable", "fixable"),
            ("no-fix", "with no fix (why given)"),
            ("no-rule", "with no rule"),
            ("expected", "expected"),
        )
        if counts[css]
    )
    noun = "recompile" if accounting.total == 1 else "recompiles"
    if not accounting.total:
        body = "<p>No recompile: each frame compiled once.</p>"
    else:
        body = (
            f'<p><b>{accounting.total}</b> {noun}: {summary}. <span class="muted">A fix is proposed until a run '
            "shows what it removes (<code>recompile-fix fix</code> or <code>verify</code>); a reason ID links to its page.</span></p>\n"
            '<table class="accounting"><tr><th class="n">count</th><th>compiled</th><th>ends</th><th>why</th></tr>'
            + "".join(rows)
            + "</table>"
        )
    return (
        f'<section class="card" id="accounting" data-recompiles="{accounting.total}">'
        f"<h2>Every recompile accounted for</h2>\n{body}\n</section>\n"
    )


# -- verification ----------------------------------------------------------------------------


def _verification_rows(profile: Profile, verification: Verification | None) -> dict[int, FrameRow]:
    """Each frame of the Profile -> its before/after row (matched by file, name and first line)."""
    if verification is None:
        return {}
    found: dict[int, FrameRow] = {}
    for frame in profile.frames:
        for row in verification.frames:
            if (row.file, row.name, row.line_before) == (frame.file, frame.name, frame.first_line):
                found[id(frame)] = row
                break
    return found


def _before_after(frame: Frame, row: FrameRow | None) -> str:
    if row is None:
        return '<p class="muted">Not matched in the verification runs.</p>\n'
    bars = []
    for stat, title in (("compiles", "compiles"), ("compile_seconds", "compile seconds")):
        before = (row.before or {}).get(stat)
        after = (row.after or {}).get(stat)
        top = max(v for v in (before, after, 0) if v is not None) or 1
        seconds = stat == "compile_seconds"
        cells = []
        for side, value in (("before", before), ("after", after)):
            shown = value or 0
            w = max(round(260 * shown / top, 1), 1 if shown else 0)
            text = "-" if value is None else (f"{shown:.2f} s" if seconds else str(int(shown)))
            cells.append(
                f'<g><text x="0" y="{14 if side == "before" else 32}">{side}</text>'
                f'<rect class="bar {side}" data-side="{side}" data-value="{shown}" x="54" '
                f'y="{4 if side == "before" else 22}" width="{w}" height="12"/>'
                f'<text x="{54 + w + 6}" y="{14 if side == "before" else 32}">{text}</text></g>'
            )
        bars.append(
            f'<div style="display:inline-block;margin-right:24px"><div class="muted">{title}</div>'
            f'<svg class="chart before-after" data-stat="{stat}" xmlns="http://www.w3.org/2000/svg" width="380" '
            f'height="38" viewBox="0 0 380 38">{"".join(cells)}</svg></div>'
        )
    return f'<h3>Before and after the fixes</h3>\n<div class="before-after">{"".join(bars)}</div>\n'


class _SourceLines:
    """Lines of the user's files (for call sites), read once each; torch's own may be absent.
    A line is shown only from a file whose bytes are the ones the Profile hashed (a committed
    Profile naming /proc/self/environ put the CI's secrets in the page)."""

    def __init__(self, root: Path, profile: Profile):
        self.root = root
        self.profile = profile
        self._files: dict[str, list[str]] = {}

    def line(self, path: str, number: int) -> str:
        if path not in self._files:
            try:
                data = read_named_file(
                    path, self.root, self.profile.interpreter, expected=self.profile.sources.get(path), checked=True
                )
                self._files[path] = data.decode("utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._files[path] = []
        lines = self._files[path]
        return lines[number - 1] if 0 < number <= len(lines) else ""
