"""RF001's marks as code and words: the torch APIs they write, a mark on one tensor's
dimensions (``Mark``), the loop that marks every item of a list, and the text of the statements,
messages and notes that name them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_site_code import (
    argument_for_base,
    is_plain_dotted,
)
from recompile_fix.analysis.call_targets import Base, CallTarget
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.format import format_statement
from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Finding, Safety
from recompile_fix.findings.releases import TorchApi
from recompile_fix.profile.model import Frame
from recompile_fix.profile.sources import Step

__all__ = [
    "BACKED_SIZE_OBLIVIOUS",
    "CONTIGUOUS_COPY",
    "MARK_DYNAMIC",
    "MARK_UNBACKED",
    "MAYBE_MARK_DYNAMIC",
    "Mark",
    "argument_order",
    "dim_text",
    "dims_code",
    "indented",
    "loops_of_marks",
    "marked_expression",
    "UNHELD_UNPROVEN",
    "unheld_notes",
    "merge_same_call",
    "none_message",
    "shared_message",
    "short_path",
    "singular",
    "site_message",
    "steps_code",
    "steps_json",
    "target_label",
]

MARK_DYNAMIC = TorchApi("torch._dynamo.mark_dynamic", None, "measured: present 2.6.0 to 2.15.0")
MAYBE_MARK_DYNAMIC = TorchApi("torch._dynamo.maybe_mark_dynamic", None, "measured: present 2.6.0 to 2.15.0")
# torch._dynamo.decorators.mark_unbacked(t, dim): a dynamic size that is not specialised at 0 or 1.
MARK_UNBACKED = TorchApi(
    "torch._dynamo.decorators.mark_unbacked", (2, 4), "measured: present 2.6.0 to 2.15.0; 2.4 from its PR"
)
CONTIGUOUS_COPY = TorchApi("torch.contiguous_format", None, "every release")
# Suggested in a note only (a global switch is the user's call, never written).
BACKED_SIZE_OBLIVIOUS = TorchApi(
    "torch.fx.experimental._config.backed_size_oblivious", (2, 8), "measured: absent 2.6.0, present 2.8.0", "note"
)


@dataclass
class Mark:
    """One tensor (or, in a loop, one leaf of every item) and the dimensions to mark."""

    target: CallTarget
    dims: set[int] = field(default_factory=set)


def loops_of_marks(marks: list[Mark]) -> list[dict[str, Any]]:
    """Marks of the items of one list (``cache.layers[0].keys``, ``cache.layers[1].keys``, ...,
    ``.values``) become one loop over it, when two or more items have the same leaves."""
    by_container: dict[tuple[Base, tuple[Step, ...]], dict[int, list[Mark]]] = {}
    for m in marks:
        steps = m.target.steps
        at = next((i for i, s in enumerate(steps) if s.is_index), None)
        if at is None:
            continue
        key = (m.target.base, steps[:at])
        by_container.setdefault(key, {}).setdefault(int(steps[at].key), []).append(m)
    loops = []
    for (base, container), items in by_container.items():
        shapes = {
            index: sorted(
                (steps_code(steps_json(m.target.steps[len(container) + 1 :])), tuple(sorted(m.dims))) for m in ms
            )
            for index, ms in items.items()
        }
        if len(items) < 2 or len({tuple(s) for s in shapes.values()}) != 1:
            continue
        first = next(iter(items.values()))
        leaves = [{"steps": steps_json(m.target.steps[len(container) + 1 :]), "dims": sorted(m.dims)} for m in first]
        loops.append(
            {
                "base": base,
                "container": container,
                "leaves": leaves,
                "members": [m for ms in items.values() for m in ms],
            }
        )
    return loops


def target_label(source: SourceFile, call: cst.Call, target: CallTarget) -> str:
    """How the user's code names the base: the argument's text when it is a name, else the
    parameter or keyword it is passed as."""
    base = target.base
    if base.expr is not None:
        return base.expr
    arg = argument_for_base(call, base)
    if arg is not None and is_plain_dotted(arg.value):
        return source.code(arg.value)
    if base.keyword is not None:
        return base.keyword
    if base.star:
        return "batch"
    return target.param or (f"input{base.index}" if base.index else "x")


def argument_order(call: cst.Call, base: Base) -> int:
    """Marks in the order the call passes their arguments (the callee's attributes last)."""
    arg = argument_for_base(call, base) if base.expr is None else None
    return next((i for i, a in enumerate(call.args) if a is arg), len(call.args))


def site_message(
    entries: list[dict[str, Any]], loops: list[dict[str, Any]], frame: Frame, here: int, total: int
) -> str:
    parts = [f"`{e['label']}{steps_code(e['steps'])}` dim {dim_text(e['dims'])}" for e in entries]
    for loop in loops:
        leaves = ", ".join(
            f"`{steps_code(leaf['steps']).lstrip('.')}` dim {dim_text(leaf['dims'])}" for leaf in loop["leaves"]
        )
        parts.append(f"each of `{loop['label']}{steps_code(loop['container'])}` ({leaves})")
    compiles = f"{here} compiles" if here == total else f"{here} of its {total} compiles at this call"
    verb = "changes" if len(parts) == 1 and not loops else "change"
    return f"{', '.join(parts)} passed to compiled `{frame.shown_name}` {verb} size ({compiles}): mark {'it' if verb == 'changes' else 'them'} dynamic before the call"


def borrowed_message(entries: list[dict[str, Any]], loops: list[dict[str, Any]], frame: Frame) -> str:
    """A call that needs the mark because the fix marks the same dims at other calls."""
    parts = [f"`{e['label']}{steps_code(e['steps'])}` dim {dim_text(e['dims'])}" for e in entries]
    parts += [f"each of `{loop['label']}{steps_code(loop['container'])}`" for loop in loops]
    return (
        f"{', '.join(parts)} passed to compiled `{frame.shown_name}` compiled dynamic here only because other "
        "calls changed its size: mark it dynamic before this call too, as they are"
    )


def shared_message(entries: list[dict[str, Any]], loops: list[dict[str, Any]], frame: Frame) -> tuple[str, str]:
    """A call that passes unmarked what the program marks dynamic at another call: the message,
    and the note that says why."""
    parts = [f"`{e['label']}{steps_code(e['steps'])}` dim {dim_text(e['dims'])}" for e in entries]
    parts += [f"each of `{loop['label']}{steps_code(loop['container'])}`" for loop in loops]
    return (
        f"{', '.join(parts)} passed to compiled `{frame.shown_name}` unmarked here, marked dynamic at "
        "another call: torch compiles again for the mark; mark it before this call too",
        "torch guards whether a tensor was marked dynamic (PR #176341): a graph traced with it "
        "unmarked here does not serve the marked call, even at a size it had; marked at both, one "
        "graph serves them",
    )


def none_message(source: str, dims: list[int], frame: Frame, compiles: int) -> str:
    counted = f"{compiles} compile" + ("s" if compiles != 1 else "")
    return f"`{source}` of compiled `{frame.shown_name}` changes size in dim {dim_text(dims)} ({counted})"


def dim_text(dims: list[int]) -> str:
    return ", ".join(map(str, dims))


def merge_same_call(findings: list[Finding]) -> list[Finding]:
    """One finding per call. Several compiled frames can see the same tensors through one call: a
    compiled DDP or other torch wrapper (``inner(*args)``) and the user's ``forward`` under it.
    Their marks merge; ``maybe_mark_dynamic`` wins when either frame needs it."""
    merged: list[Finding] = []
    by_call: dict[tuple[Any, ...], Finding] = {}
    for finding in findings:
        p = finding.params
        if not p.get("call"):
            merged.append(finding)
            continue
        key = (finding.file, tuple(p["call"]))
        first = by_call.get(key)
        if first is None:
            by_call[key] = finding
            merged.append(finding)
            continue
        q = first.params
        for entry in p["marks"]:
            same = next((e for e in q["marks"] if (e["base"], e["steps"]) == (entry["base"], entry["steps"])), None)
            if same is None:
                q["marks"].append(entry)
            else:
                same["dims"] = sorted(set(same["dims"]) | set(entry["dims"]))
                same["contiguous"] = bool(same["contiguous"] or entry["contiguous"])
        for loop in p["loops"]:
            if not any((e["base"], e["container"]) == (loop["base"], loop["container"]) for e in q["loops"]):
                q["loops"].append(loop)
        if "maybe_mark_dynamic" in (p["mark"], q["mark"]):
            q["mark"] = "maybe_mark_dynamic"
        elif "decorators.mark_unbacked" in (p["mark"], q["mark"]):
            q["mark"] = "decorators.mark_unbacked"
        if finding.safety is Safety.UNSAFE:
            # Merged: unproven only while every unsafe part is (a trade-off stays one).
            first.unsafe_because = (
                UNPROVEN
                if finding.unsafe_because == UNPROVEN
                and (first.safety is Safety.SAFE or first.unsafe_because == UNPROVEN)
                else TRADE_OFF
            )
            first.safety = Safety.UNSAFE
        first.evidence.setdefault("also_frames", []).append(finding.evidence.get("frame"))
        first.covers.extend(c for c in finding.covers if c not in first.covers)
        first.notes.extend(n for n in finding.notes if n not in first.notes)
    return merged


# -- helpers: rewriting ----------------------------------------------------------------------


def steps_json(steps: tuple[Step, ...]) -> list[list[Any]]:
    return [[s.kind, s.key] for s in steps]


def steps_code(steps: list[list[Any]]) -> str:
    """``.layers[0].keys``, ``["input_ids"]``: as the fix writes them (black's quotes)."""
    return "".join(f".{key}" if kind == "attr" else f"[{json.dumps(key)}]" for kind, key in steps)


def dims_code(dims: list[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else str(list(dims))


def singular(container: list[list[Any]]) -> str:
    """The loop variable for ``cache.layers``: ``layer``."""
    name = str(container[-1][1]) if container and container[-1][0] == "attr" else "item"
    return name[:-1] if name.endswith("s") and len(name) > 2 else "item"


def short_path(path: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def marked_expression(source: SourceFile, call: cst.Call, entry: dict[str, Any]) -> str | None:
    """The expression the fix marks for one entry (as ``fix`` spells it), or None when the fix
    would bind the argument to a new name."""
    base = Base.from_json(entry["base"])
    if base.expr is not None:
        name = base.expr
    else:
        arg = argument_for_base(call, base)
        if arg is None:
            return None
        if isinstance(arg.value, cst.Name):
            name = arg.value.value
        elif is_plain_dotted(arg.value) and not entry.get("contiguous"):
            name = source.code(arg.value)
        else:
            return None
    return name + steps_code(entry["steps"])


def indented(statement: str, indent: str) -> str:
    return "".join(indent + line + "\n" for line in format_statement(statement, len(indent)).splitlines())


# Why marks tied to an input the call cannot mark are unproven (a trial: a mark on the attention
# mask before generate(), 7 -> 7 compiles: torch recompiled for the library's own copies).
UNHELD_UNPROVEN = (
    "unproven: torch recompiles for the size of an input it sees change unmarked, so marks on the "
    "tensors this call holds change nothing while those it cannot mark change with them; `fix` keeps "
    "them only where a run shows fewer compiles"
)


def unheld_notes(unheld: list[tuple[str, int, str]]) -> list[str]:
    """One note per reason a call cannot mark a tensor that changes with the marked ones (a
    generate() call passes a dozen: one line for all that library code passes, not one each)."""
    by_reason: dict[str, list[tuple[str, int]]] = {}
    for src, d, why in unheld:
        by_reason.setdefault(why.replace(f"`{src}`", "`{}`"), []).append((src, d))
    notes = []
    for why, members in by_reason.items():
        if len(members) == 1:
            (src, d), pronoun = members[0], "it"
            what = f"`{src}` dim {d} changes"
            why = why.replace("`{}`", f"`{src}`")
        else:
            dims: dict[str, list[int]] = {}
            for src, d in members:
                dims.setdefault(src, []).append(d)
            shown = [f"`{src}` dim {', '.join(map(str, ds))}" for src, ds in list(dims.items())[:4]]
            more = f" and {len(dims) - 4} more" if len(dims) > 4 else ""
            what, pronoun = f"{', '.join(shown)}{more} change", "them"
            why = (
                why.replace("`{}`", "each of them")
                .replace("does not hold it (it is a copy", "holds none of them (each a copy")
                .replace("`{}`", "them")
            )
        notes.append(
            f"{what} with them, but {why}: the marks are `maybe_mark_dynamic`, which cannot raise where "
            f"torch specialises {pronoun}; torch may still recompile for {pronoun}"
        )
    return notes
