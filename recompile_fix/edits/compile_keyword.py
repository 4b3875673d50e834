"""Keyword arguments a rule adds to a call: ``<keyword>=True`` at a ``torch.compile`` call it
found (``dynamic=True``, ``isolate_recompiles=True``: the one edit several rules make there), and
any keywords appended in the call's own layout (``append_keywords``).

A Finding carries the call's span (``params["compile_call"]``: start line, column, end line,
column, as libcst's positions give it) and how the keyword goes in (``params["dynamic"]``):
``"decorate"`` a bare ``@torch.compile``, ``"add"`` to the call's arguments, ``"replace"`` the
value it has."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_site_code import node_at_span
from recompile_fix.analysis.compile_calls import CompileCall
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety

__all__ = [
    "append_keywords",
    "compile_call_params",
    "compile_keyword_edits",
    "dynamic_true_at",
    "dynamic_true_finding",
    "one_per_compile_call",
]


def compile_call_params(source: SourceFile, node: cst.CSTNode, keyword: str = "dynamic") -> dict[str, Any]:
    """The params that ``compile_keyword_edits`` reads, for ``node`` (a ``torch.compile`` call, or
    a bare ``@torch.compile`` decorator's expression)."""
    pos = source.positions[node]
    given = isinstance(node, cst.Call) and any(a.keyword is not None and a.keyword.value == keyword for a in node.args)
    return {
        "compile_call": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
        "keyword": keyword,
        "dynamic": "replace" if given else "add" if isinstance(node, cst.Call) else "decorate",
    }


def compile_keyword_edits(file: str, params: dict[str, Any], source: SourceFile, rule: str) -> list[Edit]:
    """``<keyword>=True`` at the compile call ``params`` names (``compile_call_params``)."""
    keyword = params.get("keyword", "dynamic")
    if params.get("dynamic") == "decorate":  # a bare `@torch.compile`
        # The decorator replaced, not a call appended: two keywords there overlap (one is made)
        # where two insertions would compose into `@torch.compile(a=True)(b=True)`.
        node = node_at_span(source, cst.BaseExpression, params["compile_call"])
        start, end = source.span(node)
        return [Edit(file, start, end, f"{source.text[start:end]}({keyword}=True)", rule)]
    node = node_at_span(source, cst.Call, params["compile_call"])
    given = next((a for a in node.args if a.keyword is not None and a.keyword.value == keyword), None)
    if given is not None:
        start, end = source.span(given.value)
        return [Edit(file, start, end, "True", rule)]
    return [append_keywords(source, file, node, [f"{keyword}=True"], rule)]  # in the call's own layout


def append_keywords(source: SourceFile, file: str, call: cst.Call, keywords: list[str], rule: str) -> Edit:
    """Keyword arguments appended to a call, in the call's own layout."""
    if not call.args:
        at = source.span(call)[1] - 1
        return Edit(file, at, at, ", ".join(keywords), rule)
    last = call.args[-1]
    end = source.span(last)[1]
    closing = source.span(call)[1] - 1
    line_start = source.text.rfind("\n", 0, closing) + 1
    if source.text[line_start:closing].strip() == "" and line_start > end:
        # One argument per line, closing paren on its own line: one more line per keyword.
        last_line = source.positions[last].start.line
        leading = re.match(r"\s*", source.lines[last_line - 1])
        assert leading is not None  # `\s*` matches every line
        indent = leading.group(0)
        comma = "" if not isinstance(last.comma, cst.MaybeSentinel) else ","
        text = "".join(f"{indent}{k},\n" for k in keywords)
        if comma:
            return Edit(file, end, line_start, f",\n{text}", rule)
        return Edit(file, line_start, line_start, text, rule)
    text = ", ".join(keywords)
    if not isinstance(last.comma, cst.MaybeSentinel):
        return Edit(file, closing, closing, f" {text}", rule)
    return Edit(file, end, end, f", {text}", rule)


def dynamic_true_at(
    call: CompileCall, traced: str, function_name: str, caveat: str = ""
) -> tuple[list[str], dict[str, Any], bool]:
    """What a Finding that writes ``dynamic=True`` at ``call`` says and carries: its notes
    (``traced``: "with `dynamic=True` torch traces `x` as ... from the first compile"; ``caveat``:
    more that a run must settle), its params (``present`` where the call says it already), and
    whether it is a trade-off (the call compiles a whole model with a backend that generates
    kernels, or says ``dynamic=False``)."""
    if call.static:
        notes = [
            f"{traced} (under `dynamic=False` every new value compiles again, PGO or not)",
            "the call asks for `dynamic=False`: every tensor size becomes dynamic instead (a trade-off)",
        ]
    elif call.whole and call.no_kernels:
        notes = [
            f"{traced} (without it, only once it has changed; PGO's second run does the same)",
            "the call compiles more than this function, and every size it reads becomes dynamic; its "
            "backend generates no kernels, so none is traded: unproven, `fix` keeps it where a run shows "
            "fewer compiles and the same outputs",
        ]
    elif call.whole:
        notes = [
            f"{traced} (without it, only once it has changed; PGO's second run does the same)",
            "the call compiles more than this function: every size it reads becomes dynamic "
            "(kernels that cannot specialise on sizes): a trade-off",
        ]
    else:
        notes = [
            f"{traced} (without it, only once it has changed; PGO's second run does the same)",
            f"it also traces the sizes of the tensors `{function_name}` gets as dynamic{caveat}: unproven, `fix` "
            "keeps it where a run shows fewer compiles and the same outputs",
        ]
    params = compile_call_params(call.source, call.node)
    if call.dynamic:
        params["present"] = True
    return notes, params, call.static or (call.whole and not call.no_kernels)


def dynamic_true_finding(
    finding: Finding,
    call: CompileCall,
    names: tuple[str, str],
    traced: str,
    why: list[str],
    caveat: str = "",
) -> Finding:
    """``finding`` (a rule's fix of a number, or its refusal of one) made ``dynamic=True`` at
    ``call``: the same recompiles, ``why`` first in its notes, then what ``dynamic_true_at`` says
    (``traced``, ``caveat``); unproven, or a trade-off where the call compiles more or says
    ``dynamic=False``. ``names``: the compiled function's, as its frame shows it and as its code
    names it."""
    shown_name, function_name = names
    notes, params, trade_off = dynamic_true_at(call, traced, function_name, caveat)
    return Finding(
        rule=finding.rule,
        file=call.file,
        location=call.source.location_of(call.node, call.file),
        message=finding.message.rsplit(": ", 1)[0] + f": compile `{call.compiled or shown_name}` with `dynamic=True`",
        safety=Safety.UNSAFE,
        evidence=finding.evidence,
        notes=[*why, *notes],
        covers=finding.covers,
        params=params,
        unsafe_because="trade-off" if trade_off else UNPROVEN,
    )


def one_per_compile_call(findings: list[Finding], frame_name: str) -> list[Finding]:
    """One Finding per compile call and keyword where several would write the same edit there
    (`dynamic=True` for each of three floats of a loss: one edit, tried once by `fix`), the rest
    left as they are. Each such Finding names what it is for in ``params["names"]``; merged, the
    one kept covers all their recompiles and names them all (a fallback merges with fallbacks)."""
    kept: dict[tuple[object, ...], Finding] = {}
    out: list[Finding] = []
    for finding in findings:
        if "compile_call" not in finding.params or "names" not in finding.params:
            out.append(finding)
            continue
        call = tuple(finding.params["compile_call"])
        key = (
            finding.rule,
            finding.file,
            call,
            finding.params.get("keyword"),
            finding.fallback,
            finding.unsafe_because,
        )
        first = kept.setdefault(key, finding)
        if first is finding:
            out.append(finding)
            continue
        first.params["names"] += [n for n in finding.params["names"] if n not in first.params["names"]]
        first.params.update({k: v for k, v in finding.params.items() if v is True})  # a caveat of one holds
        first.covers += [c for c in finding.covers if c not in first.covers]
        first.notes += [n for n in finding.notes if n not in first.notes and not n.startswith("with `dynamic=True`")]
        names = " and ".join(f"`{n}`" for n in first.params["names"])
        first.message = f"{names} change between calls of compiled `{frame_name}`: {first.message.rsplit(': ', 1)[1]}"
        first.notes = [
            f"with `dynamic=True` torch traces {names} from the first compile{n.split(' from the first compile', 1)[1]}"
            if n.startswith("with `dynamic=True`")
            else n
            for n in first.notes
        ]
    return out
