"""`recompile-fix report`: a Profile as one table a person reads in ten seconds (or as JSON)."""

from __future__ import annotations

import re
from collections import Counter

from recompile_fix.findings.accounting import Accounting
from recompile_fix.findings.finding import Finding
from recompile_fix.notebook import display_location
from recompile_fix.output import wrap
from recompile_fix.profile.model import REASON_KINDS, Compile, Frame, Location, Profile, Reason
from recompile_fix.profile.reason_classes import reason_id
from recompile_fix.profile.resume import parse_resume
from recompile_fix.profile.sources import guard_words, shown_source
from recompile_fix.reason_docs import reason_url

__all__ = [
    "call_site_label",
    "frame_label",
    "grouped_reasons",
    "profile_ranks",
    "rank_counts",
    "reason_phrase",
    "render_json",
    "render_text",
    "short_path",
]


def _reason_phrase(reason: Reason) -> str:
    words = REASON_KINDS.get(reason.kind, reason.kind)
    source = f" {shown_source(reason.source)}" if reason.source and reason.kind != "limit_hit" else ""
    dim = f" dim {reason.dim}" if reason.dim is not None else ""
    if reason.kind == "other" and not (source or dim) and guard_words(reason.text):
        return f"{words}: `{guard_words(reason.text)}`"  # torch's own words: no kind describes it
    return f"{words}:{source}{dim}" if (source or dim) else words


def reason_phrase(reason: Reason) -> str:
    """A typed reason in plain words, as the report groups them."""
    return _reason_phrase(reason)


def _reason_example(reason: Reason) -> str:
    if reason.expected is not None and reason.actual is not None:
        return f"{reason.expected} -> {reason.actual}"
    if reason.value is not None:
        return f"was {reason.value!r}"
    return ""


def grouped_reasons(frame: Frame, compiles: list[Compile] | None = None) -> list[tuple[str, int, str]]:
    """(plain-words reason, count, an example) per distinct reason, most frequent first (of the
    frame's compiles, or of ``compiles``: one call site's)."""
    counts: Counter = Counter()
    examples: dict[str, list[str]] = {}
    # One reason per compile (``shown_reason``); the Profile keeps every entry's failure for the rules.
    for compile_ in frame.compiles if compiles is None else compiles:
        reason = shown_reason(compile_)
        if reason is None:
            continue
        phrase = _reason_phrase(reason)
        counts[phrase] += 1
        examples.setdefault(phrase, []).append(_reason_example(reason))
    return [(phrase, n, _first_and_last(examples[phrase])) for phrase, n in counts.most_common()]


def _unnamed_changes(compiles: list[Compile]) -> list[str]:
    """A line per value that changed beside the guard torch named (``Compile.also_failed``), in
    how many of these compiles: the recorder's own evaluation of the cached graphs' guards."""
    counts: Counter = Counter()
    for compile_ in compiles:
        named = {r.source for r in compile_.reasons}
        counts.update({r.source for r in compile_.also_failed or () if r.source not in named})
    # The items of one list (`rewards[0]` ... `rewards[47]`): one line for the list, not one each.
    items: dict[str, list[int]] = {}
    for source in counts:
        item = _LIST_ITEM.match(source or "")
        if item:
            items.setdefault(item.group(1), []).append(int(item.group(2)))
    lines = []
    for source, n in sorted(counts.items()):
        item = _LIST_ITEM.match(source or "")
        indices = items.get(item.group(1), []) if item else []
        if item and len(indices) > 3:
            if int(item.group(2)) == min(indices):
                most = max(counts[f"{item.group(1)}[{i}]"] for i in indices)
                lines.append(
                    f"{most}x changed too, which torch did not name: {len(indices)} items of `{item.group(1)}` "
                    f"(`{item.group(1)}[{min(indices)}]` ... `{item.group(1)}[{max(indices)}]`)"
                )
            continue
        lines.append(f"{n}x changed too, which torch did not name: {shown_source(source)}")
    return lines


_LIST_ITEM = re.compile(r"^(.+)\[(\d+)\]$")


# A cache entry for another state: the call could never have used it, so its failure says
# nothing of why this call compiled where an entry of the call's own state failed on another guard.
_OTHER_STATE = ("grad_mode", "training_flag", "dispatch_key_mismatch", "global_state")


def shown_reason(compile_: Compile) -> Reason | None:
    """The reason a report line gives for ``compile_``: the newest cache entry's failure (torch's
    own `recompile_reason`), unless that entry is for another state (the eval graph failing on
    grad mode) and an entry of the call's own state failed on something else (the image size)."""
    if not compile_.reasons:
        return None
    own_state = [r for r in compile_.reasons if r.kind not in _OTHER_STATE]
    return own_state[0] if own_state and compile_.reasons[0].kind in _OTHER_STATE else compile_.reasons[0]


def reason_ids(frame: Frame) -> dict[str, str]:
    """The registry ID (profile.reason_classes) of each phrase ``grouped_reasons`` gives."""
    shown = [r for r in (shown_reason(c) for c in frame.compiles) if r is not None]
    return {_reason_phrase(r): reason_id(r.kind) for r in shown}


def _first_and_last(examples: list[str]) -> str:
    examples = [e for e in examples if e]
    if not examples:
        return ""
    return examples[0] if examples[0] == examples[-1] else f"{examples[0]} ... {examples[-1]}"


def profile_ranks(profile: Profile) -> list[int]:
    """The distributed ranks the Profile saw (torchrun workers, TORCH_TRACE rank files)."""
    ranks = {p.get("rank") for p in profile.processes} | {c.rank for f in profile.frames for c in f.compiles}
    return sorted(r for r in ranks if r is not None)


def rank_counts(frame: Frame, ranks: list[int]) -> dict[int, int]:
    """Compiles of the frame on each rank (0 where a rank never compiled it)."""
    return {rank: sum(1 for c in frame.compiles if c.rank == rank) for rank in ranks}


def _rank_line(counts: dict[int, int]) -> str:
    return ", ".join(f"rank {rank}: {n} compile{'s' if n != 1 else ''}" for rank, n in counts.items())


def short_path(path: str) -> str:
    """A library file as its import path spells it (``torch/optim/adam.py``), not where one
    machine's virtualenv put it; the project's own files as they are."""
    normal = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in normal:
            return normal.rsplit(marker, 1)[1]
    return path


def frame_label(frame: Frame) -> str:
    """``forward (model.py:12)``; a library decorator's wrapper by what it calls, then the
    wrapper (``UNet2DConditionModel.forward via wrapper (diffusers/utils/peft_utils.py:80)``)."""
    shown = frame.shown_name
    wrapper = shown != frame.name and frame.name != "inner" and parse_resume(frame.name) is None
    name = f"{shown} via {frame.name}" if wrapper else frame.name
    return f"{name} ({display_location(short_path(frame.file), frame.first_line)})"


def call_site_label(site: Location | None, compiles: list[Compile], with_column: bool = False) -> str:
    """``called at train.py:42 (in main)``, and the library code between where there is some
    (``via transformers/generation/utils.py:4333 in _prefill``); ``train.py:42:17`` where
    ``with_column`` (two calls on one line)."""
    if site is None:
        return "called from an unrecorded place"
    at = display_location(site.file, site.line) + (f":{site.col + 1}" if with_column and site.col is not None else "")
    where = f"called at {at}" + (f" (in {site.function})" if site.function else "")
    library = next((c.library_frames for c in compiles if c.library_frames), [])
    if library:
        inner = library[-1]
        where += f" via {short_path(inner.file)}:{inner.line} in {inner.function}"
    return where


def render_text(
    profile: Profile,
    *,
    findings: list[Finding] | None = None,
    accounting: Accounting | None = None,
    width: int | None = None,
    concise: bool = False,
) -> str:
    """The table, each frame's reasons and graph breaks, the fixes (one line each where
    ``concise``, else with their notes) and where every recompile ends (``accounting``); lines
    longer than ``width`` (the terminal's) wrap, the table's rows aside."""
    lines = [
        f"Profile of `{' '.join(profile.command)}` (torch {profile.torch_version or '?'}, "
        f"exit code {profile.exit_code if profile.exit_code is not None else '?'})"
    ]
    if not profile.frames:
        lines.append(profile.nothing_compiled())
        return "\n".join(lines) + "\n"
    header = ("frame", "compiles", "recompiles", "compile s", "limit hits", "graph breaks")
    frames = sorted(profile.frames, key=lambda f: (-f.compile_count, -f.compile_seconds))
    rows = [(frame, _table_cells(frame)) for frame in frames]
    widths = [max(len(header[i]), *(len(r[1][i]) for r in rows)) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])])

    aligned = {len(lines), len(lines) + 1}  # the table's lines: columns, never wrapped
    lines.append(fmt(header))
    lines.append("  ".join("-" * w for w in widths))
    ranks = profile_ranks(profile)
    for frame, cells in rows:
        aligned.add(len(lines))
        lines.append(fmt(cells))
        lines.extend(_frame_lines(frame, ranks))
    lines.extend(_closing_lines(profile, ranks, findings, accounting, concise=concise))
    return (
        "\n".join(line if i in aligned else wrap(line, width, indent="      ") for i, line in enumerate(lines)) + "\n"
    )


def _table_cells(frame: Frame) -> tuple[str, ...]:
    return (
        frame_label(frame),
        str(frame.compile_count),
        str(frame.recompiles),
        f"{frame.compile_seconds:.2f}",
        str(frame.limit_hits),
        str(sum(b.count for b in frame.graph_breaks)),
    )


def _frame_lines(frame: Frame, ranks: list[int]) -> list[str]:
    """Under a frame's row: its compiles per rank, its reasons (per call site where it has more
    than one) and its graph breaks."""
    lines = []
    if frame.name == "inner" and frame.file.replace("\\", "/").endswith("torch/_dynamo/external_utils.py"):
        # torch's wrap_inline: what torch.compile wraps around an nn.Sequential (a torch.nn module)
        # or a decorated function (`@torch.no_grad()`); one code object, so one cache for all.
        lines.append(
            "    (torch's wrapper around a compiled torch.nn module, e.g. nn.Sequential, or a decorated "
            "function: every object compiled this way shares this frame's cache; arguments are `args[i]`)"
        )
    if len(ranks) > 1:
        counts = rank_counts(frame, ranks)
        uneven = " (not the same on every rank)" if len(set(counts.values())) > 1 else ""
        lines.append(f"    per rank: {_rank_line(counts)}{uneven}")
    sites = frame.call_sites()
    if len(sites) > 1:
        # Per call site: a recompile at one call says nothing about what another passes.
        lines_seen = [(s.file, s.line) for s, _ in sites if s is not None]
        for site, compiles in sites:
            recompiles = sum(1 for c in compiles if c.is_recompile and not c.limit_hit)
            shared = site is not None and lines_seen.count((site.file, site.line)) > 1
            lines.append(
                f"    {call_site_label(site, compiles, with_column=shared)}: "
                f"{len(compiles)} compile{'s' if len(compiles) != 1 else ''}"
                f", {recompiles} recompile{'s' if recompiles != 1 else ''}"
            )
            for phrase, count, example in grouped_reasons(frame, compiles):
                suffix = f" ({example})" if example else ""
                lines.append(f"        {count}x {phrase}{suffix}")
            lines.extend(f"        {line}" for line in _unnamed_changes(compiles))
    else:
        for phrase, count, example in grouped_reasons(frame):
            suffix = f" ({example})" if example else ""
            lines.append(f"    {count}x {phrase}{suffix}")
        lines.extend(f"    {line}" for line in _unnamed_changes(frame.compiles))
    for gb in frame.graph_breaks:
        lines.append(
            f"    graph break x{gb.count} at {display_location(short_path(gb.location.file), gb.location.line)}: "
            f"{gb.reason}"
        )
    return lines


def _closing_lines(
    profile: Profile,
    ranks: list[int],
    findings: list[Finding] | None,
    accounting: Accounting | None,
    *,
    concise: bool,
) -> list[str]:
    """After the table: the totals, the fixes, and where every recompile ends."""
    total_recompiles = sum(f.recompiles for f in profile.frames)
    total_seconds = sum(f.compile_seconds for f in profile.frames)
    lines = [
        "",
        f"{len(profile.frames)} frames, {profile.total_compiles} compiles, "
        f"{total_recompiles} recompiles, {total_seconds:.2f} s compiling, "
        f"{sum(f.limit_hits for f in profile.frames)} limit hits",
    ]
    if len(ranks) > 1:
        totals = {rank: sum(rank_counts(f, ranks)[rank] for f in profile.frames) for rank in ranks}
        lines.append(f"{len(ranks)} ranks: {_rank_line(totals)}")
    if findings:
        lines.append("")
        lines.append("Fixes (`recompile-fix apply PATHS --diff` shows them; [no fix] says why not):")
        lines.extend(f.describe(notes=not concise) for f in findings)
    if accounting is not None and accounting.total:
        lines.append("")
        lines.append(f"Every recompile accounted for: {accounting.summary()}")
        for line, count in accounting.unexplained(frame_label):
            lines.append(f"    {count}x {line}")
    return lines


def render_json(
    profile: Profile, findings: list[Finding] | None = None, *, accounting: Accounting | None = None
) -> dict:
    ranks = profile_ranks(profile)
    return {
        "findings": [f.to_json() for f in findings or []],
        **({"recompiles": accounting.to_json(frame_label)} if accounting is not None else {}),
        "command": profile.command,
        "torch_version": profile.torch_version,
        "exit_code": profile.exit_code,
        "frames": [
            {
                "file": f.file,
                "line": f.first_line,
                "name": f.name,
                "compiles": f.compile_count,
                "recompiles": f.recompiles,
                "compile_seconds": round(f.compile_seconds, 6),
                "limit_hits": f.limit_hits,
                "graph_breaks": [
                    {"file": b.location.file, "line": b.location.line, "reason": b.reason, "count": b.count}
                    for b in f.graph_breaks
                ],
                "reasons": [
                    {"reason": p, "count": n, "example": e, "id": reason_ids(f)[p], "url": reason_url(reason_ids(f)[p])}
                    for p, n, e in grouped_reasons(f)
                ],
                "call_sites": [_call_site_json(f, site, compiles) for site, compiles in f.call_sites()],
                **({"ranks": {str(r): n for r, n in rank_counts(f, ranks).items()}} if len(ranks) > 1 else {}),
            }
            for f in profile.frames
        ],
    }


def _call_site_json(frame: Frame, site: Location | None, compiles: list[Compile]) -> dict:
    library = next((c.library_frames for c in compiles if c.library_frames), [])
    return {
        "file": site.file if site else None,
        "line": site.line if site else None,
        "col": site.col if site else None,
        "function": site.function if site else None,
        "via": [{"file": s.file, "line": s.line, "function": s.function} for s in library],
        "compiles": len(compiles),
        "recompiles": sum(1 for c in compiles if c.is_recompile and not c.limit_hit),
        "compile_ids": [c.id for c in compiles],
        "reasons": [{"reason": p, "count": n, "example": e} for p, n, e in grouped_reasons(frame, compiles)],
    }
