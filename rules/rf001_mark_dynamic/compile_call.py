"""RF001's fixes at the program's ``torch.compile`` call, where no mark before the call can help.

* ``dynamic=True``, where library code (``model.generate()``) makes the compiled call with
  tensors the program never holds, or where no mark can go before the call (inside a
  comprehension or a lambda: `torch.cat([embed(**batch) for batch in corpus])`).
* ``isolate_recompiles=True`` (torch >= 2.13), where several compiled wrappers share one code
  frame (ten heads of different widths, each ``torch.compile``d on its own, all run
  ``nn.Linear.forward``), each fixing the changing size to its own weight's, so the frame
  recompiles once per wrapper and the recompile limit leaves the rest running eagerly: each
  wrapper gets a cache of its own, one compile each, no limit hit. Read from the run, not the
  text: the graph specialised the size to a parameter's (``Compile.dims``, ``tied``), to a
  different value at different compiles (different parameters: different modules, as one
  module's weight keeps its shape), and the frame hit the recompile limit.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import libcst as cst

from recompile_fix.analysis.call_site_code import find_compile_call, root_name
from recompile_fix.analysis.call_targets import library_frame
from recompile_fix.analysis.compile_calls import compile_call_of, generates_no_kernels, says_dynamic_false
from recompile_fix.edits.compile_keyword import compile_call_params, compile_keyword_edits, dynamic_true_at
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Finding, Safety
from recompile_fix.findings.releases import TorchApi
from recompile_fix.profile.model import Compile
from recompile_fix.profile.resume import function_of

if TYPE_CHECKING:
    from recompile_fix.analysis.source import SourceFile

__all__ = [
    "ISOLATE_RECOMPILES",
    "fix_compile_call",
    "isolate_finding",
    "iterables_of",
    "wrapper_compile_call",
    "library_call_finding",
    "per_wrapper_sizes",
]

# A keyword of torch.compile, not a name in the text: the rule gates it by release itself.
ISOLATE_RECOMPILES = TorchApi(
    "torch.compile(isolate_recompiles=True)",
    (2, 13),
    "measured: present 2.13.0, 2.14.1 (torch.compile's signature)",
    in_text=False,
)


# libcst node classes by name: reading cst.* here would load libcst when the module is imported.
_REPEATING = frozenset({"For", "While", "ListComp", "SetComp", "DictComp", "GeneratorExp"})


def per_wrapper_sizes(group: list[tuple[str, int]], compiles: list[Compile]) -> dict[str, set[int]]:
    """{parameter: sizes} where the run specialised a dim of ``group`` to a parameter's size, at
    two or more different sizes (so: different parameters behind one frame)."""
    sizes: dict[str, set[int]] = {}
    for src, dim in group:
        for compile_ in compiles:
            record = compile_.specialized(src, dim)
            if record is not None and record.get("tied") and isinstance(record.get("size"), int):
                sizes.setdefault(record["tied"], set()).add(record["size"])
    return {p: s for p, s in sizes.items() if len(s) >= 2}


def isolate_finding(
    plan: Any, source: SourceFile, call: cst.Call, notes: list[str], repeated_only: bool = False
) -> list[Finding] | None:
    """The unsafe fix ``isolate_recompiles=True`` at the program's one ``torch.compile`` call for
    what ``call`` calls; None where the frame did not hit the limit, the torch that ran has no
    such option, or the compile call is not found (``plan``: RF001's ``SitePlan``).
    ``repeated_only``: only where that call makes several wrappers (in a loop or comprehension);
    one wrapper whose parameter is swapped (a LoRA rank) has one cache either way."""
    frame = plan.frame
    if not frame.limit_hits or not ISOLATE_RECOMPILES.runs_on(plan.release):
        return None
    found = wrapper_compile_call(plan, source, call)
    if found is None:
        return None
    compile_source, node, _ = found
    if repeated_only and not any(type(a).__name__ in _REPEATING for a in compile_source.ancestors(node)):
        return None
    if isinstance(node, cst.Call) and any(
        a.keyword is not None and a.keyword.value == "isolate_recompiles" for a in node.args
    ):
        return None  # already chosen there, one way or the other: the user's call
    location = compile_source.location_of(node, plan.site.file)
    compiled = frame.compile_count
    finding = plan.finding(
        f"compiled `{frame.shown_name}` serves several compiled wrappers, each "
        + ("with parameters of its own shapes" if repeated_only else "fixing the size to its own weight")
        + f" ({compiled} compiles, then {frame.limit_hits} recompile-limit hit): compile each "
        "with `isolate_recompiles=True`",
        Safety.UNSAFE,
        [
            *notes,
            "`isolate_recompiles=True` gives each `torch.compile` wrapper its own cache of compiled "
            "code: each compiles once for itself and none runs eagerly at the recompile limit "
            "(measured, ten heads of different widths: 8 compiles and a limit hit -> 10 compiles, no "
            "limit hit, the same outputs); a trade-off, not fewer compiles: one per wrapper",
        ],
        location,
    )
    finding.params = compile_call_params(compile_source, node, "isolate_recompiles")
    return [finding]


def wrapper_compile_call(plan: Any, source: SourceFile, call: cst.Call) -> tuple[SourceFile, cst.CSTNode, bool] | None:
    """The ``torch.compile`` call that made what ``call`` calls: named by the call, or by what
    the loop around it iterates (``for head in compiled_heads``); ``find_compile_call``'s answer."""
    names = {root_name(call.func)} | iterables_of(source, root_name(call.func))
    return find_compile_call(plan.project, plan.site.file, {n for n in names if n})


def iterables_of(source: SourceFile, name: str | None) -> set[str]:
    """The roots of what a ``for`` binding ``name`` iterates over (``for w, head in zip(widths,
    compiled)``: ``compiled``, ``widths``; ``for name, head in heads.items()``: ``heads``; a
    comprehension's ``for`` too): a list or dict of compiled wrappers called one by one."""
    found: set[str] = set()
    if not name:
        return found
    for loop in [*source.nodes(cst.For), *source.nodes(cst.CompFor)]:
        targets = {n.value for n in _names(loop.target)}
        if name not in targets:
            continue
        iterable = loop.iter
        items: list[cst.BaseExpression] = [iterable]
        if isinstance(iterable, cst.Call):  # zip(widths, compiled), enumerate(compiled), heads.items()
            items = [a.value for a in iterable.args]
            if isinstance(iterable.func, cst.Attribute):
                items.append(iterable.func.value)
        found |= {r for r in (root_name(i) for i in items) if r}
    return found


def _names(node: cst.CSTNode) -> list[cst.Name]:
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _names(e.value)]
    return []


# -- library code made the call: `dynamic=True` at the user's compile call -----------------------
def dynamic_instead(plan: Any, reasons: list[str]) -> list[Finding] | None:
    """``dynamic=True`` at the frame's compile call where no mark can go before the call (a
    comprehension): unproven where the call compiles the function alone or its backend generates
    no kernels, for `fix` to keep where a run shows fewer compiles (a trial's sentence embedder,
    its corpus embedded in a comprehension: `dynamic=True` on the function, 5 -> 2 with the
    rest); a trade-off elsewhere. None where there is no call to edit, it says so already, or it
    asks for `dynamic=False` (the program chose a graph per size: the finding says why no mark)."""
    function_name = function_of(plan.frame.name) or plan.frame.name
    call = compile_call_of(plan.project, plan.frame, function_name)
    if call is None or call.cuda_graphs or call.dynamic or call.static or plan.library:
        return None
    names = ", ".join(f"`{source}`" for source in plan.ev.changed)
    traced = f"with `dynamic=True` torch traces the sizes of {names} as dynamic from the first compile"
    notes, params, trade_off = dynamic_true_at(call, traced, function_name)
    verb, compiles = "change" if len(plan.ev.changed) > 1 else "changes", "compile" if plan.here == 1 else "compiles"
    finding = plan.finding(
        f"{names} passed to compiled `{plan.frame.shown_name}` {verb} size ({plan.here} {compiles} at "
        f"{plan.site.file}:{plan.site.line}), where no mark can go: compile it with `dynamic=True`",
        Safety.UNSAFE,
        [*reasons, *notes],
        call.source.location_of(call.node, call.file),
    )
    finding.file, finding.params = call.file, params
    finding.unsafe_because = TRADE_OFF if trade_off else UNPROVEN
    return [finding]


def library_call_finding(
    plan: Any, source: SourceFile, call: cst.Call, lost: list[str], fallback_of: Finding | None = None
) -> list[Finding]:
    """Library code (``model.generate()``) calls the compiled code with tensors the user's
    code never holds: the user's ``torch.compile`` call can make them dynamic instead. With
    ``fallback_of``, the marks on what the call does hold (unproven beside the rest): the same
    ``dynamic=True`` as their fallback, for `fix` to try where it drops them (a trial's
    ``generate()``: the mask's mark 7 -> 7 compiles, ``dynamic=True`` 7 -> 5); none where there
    is no compile call to edit."""
    if fallback_of is not None and not plan.library:
        return []
    where = library_frame(plan.library[-1])
    # What the call hands the library: the object it calls a method of (`model.generate`), or
    # a compiled function passed as an argument (`run(step, x)`).
    names = {root_name(call.func)} | {root_name(a.value) for a in call.args}
    compile_call = find_compile_call(plan.project, plan.site.file, {n for n in names if n})
    head = (
        f"library code ({where}) calls compiled `{plan.frame.shown_name}` with tensors whose size "
        f"changes ({plan.here} compiles at this call); the program cannot mark them"
    )
    if compile_call is None and fallback_of is not None:
        return []
    if compile_call is None:
        return plan.none(
            [
                head,
                *lost[:3],
                "what to do: pass `dynamic=True` where the model is compiled (`torch.compile(model.forward, "
                "dynamic=True)`; on transformers' generate() that gives 2 compiles instead of 4, the "
                "prefill/decode floor), or the library's own option to compile with dynamic shapes "
                "where it has one; the compile call was not found in "
                f"{plan.site.file}",
            ]
        )
    static_cache = _static_cache_lengths(plan.ev.compiles)
    advice = []
    if static_cache:
        advice = [
            f"a cache sized by each call (lengths {', '.join(map(str, static_cache))} seen): "
            '`generate(..., cache_implementation="static", max_cache_len=N)` (transformers\' GenerationConfig, '
            "where yours has it; `max_cache_len` alone is ignored without a static cache) with N the longest "
            "prompt plus `max_new_tokens` keeps one cache, so one graph per phase, with no dynamic kernels",
        ]
    compile_source, node, _ = compile_call
    location = compile_source.location_of(node, plan.site.file)
    # Under a backend that generates no kernels a dynamic size costs no specialised kernel: a run
    # settles it (a trial: `generate(cache_implementation="static")` under eager, 4 -> 2 compiles).
    unproven = generates_no_kernels(node) and not says_dynamic_false(node)
    finding = plan.finding(
        f"compiled `{plan.frame.shown_name}` recompiles for sizes library code ({where}) picks "
        f"({plan.here} compiles at {plan.site.file}:{plan.site.line}): compile it with `dynamic=True`",
        Safety.UNSAFE,
        [
            head,
            *lost[:3],
            *advice,
            "`dynamic=True` makes every dimension of every input dynamic from the first call: fewer "
            + (
                "compiles; its backend generates no kernels, so none is traded: unproven, `fix` keeps it "
                "where a run shows fewer compiles and the same outputs"
                if unproven
                else "compiles, but kernels that cannot specialise on sizes (check speed and outputs with "
                "`recompile-fix verify`)"
            ),
        ],
        location,
    )
    finding.params = compile_call_params(compile_source, node)
    finding.unsafe_because = UNPROVEN if unproven else TRADE_OFF
    if fallback_of is not None:
        finding.fallback, finding.covers = True, list(fallback_of.covers)
        finding.notes.append(f"tried where the marks at {plan.site.file}:{plan.site.line} are not kept")
    return [finding]


_CACHE_LENGTH = re.compile(r"\bcache\b.*\.max_cache_len$")
_CACHE_KEYS = re.compile(r"\bcache\b.*\.layers\[\d+\]\.(keys|values)$")


def _static_cache_lengths(compiles: list[Any]) -> list[int]:
    """The lengths a transformers static cache had at these compiles, where its length is what
    changed (``kwargs['cache'].layers[0].max_cache_len == 9``, or its keys' dim 2)."""
    lengths: set[int] = set()
    for compile_ in compiles:
        for reason in compile_.reasons:
            source = reason.source or ""
            if _CACHE_LENGTH.search(source) and isinstance(reason.value, int):
                lengths.add(reason.value)
            elif reason.kind == "size_mismatch" and reason.dim == 2 and _CACHE_KEYS.search(source):
                lengths |= {v for v in (reason.expected, reason.actual) if isinstance(v, int)}
    return sorted(lengths)


# -- the edit at the compile call --------------------------------------------------------------------
def fix_compile_call(finding: Finding, source: SourceFile) -> list[Edit]:
    """``dynamic=True`` (or ``isolate_recompiles=True``: ``params["keyword"]``) at the compile call."""
    return compile_keyword_edits(finding.file, finding.params, source, "RF001")
