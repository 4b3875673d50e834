"""RF002's other fix: ``dynamic=True`` at the compiled function's ``torch.compile`` call, for a
number torch specialises on its value.

Under ``dynamic=None`` torch specialises an int or float argument on its first value and traces
it as a symbolic number only once it has changed: one recompile, which PGO's second run removes
by marking it dynamic from the start. ``dynamic=True`` does that on the first run. It is the
fix for an int the compiled code uses as a size (``torch.arange(offset, offset + T)``), where a
0-d tensor cannot take its place (measured on torch 2.13: a compiled rotary embedding called
with offsets 0..5, 2 -> 1 compiles, bit for bit) and where ``dynamic_sources`` cannot name that
one int alone (``sources_finding``), and the fallback of a float's 0-d tensor where
that one rounds (the float stays a Python float in the code: torch >= 2.6). It also traces the
sizes of every tensor the function gets as dynamic, so it is unproven: `fix` keeps it where a
run shows fewer compiles and the same outputs. Where the call compiles a whole model, or says
``dynamic=False``, it is a trade-off. CUDA graphs record a graph per size: no fix.
"""

from __future__ import annotations

import re

from recompile_fix.analysis.compile_calls import compile_call_of, sets_config
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_flow import Use
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.torch_vocabulary import SYMBOLIC_SIZE_CALLS
from recompile_fix.edits.compile_keyword import dynamic_true_finding
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.releases import DYNAMIC_SOURCES
from recompile_fix.profile.model import Frame, Location, Profile

__all__ = [
    "config_edits",
    "config_present",
    "dynamic_compile_finding",
    "float_candidate",
    "float_fallback",
    "one_config_per_file",
    "settle_configs",
    "settle_shared_names",
    "size_finding",
    "sources_finding",
]

_SYMBOLIC_KINDS = frozenset({"shape", "branch", "slice", "tensor_data"})
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


def dynamic_compile_finding(
    frame: Frame, kind: str, param: str, function_name: str, project: Project, finding: Finding, why: list[str]
) -> Finding | None:
    """``finding`` (RF002's 0-d tensor for ``param``, or its refusal of one) made ``dynamic=True`` at
    the compile call of ``function_name``, with ``why`` first in its notes; None where the call is
    not found or runs CUDA graphs."""
    call = compile_call_of(project, frame, function_name)
    if call is None or call.cuda_graphs:
        return None
    traced = f"with `dynamic=True` torch traces `{param}` as a symbolic {kind} from the first compile"
    dynamic = dynamic_true_finding(finding, call, (frame.shown_name, function_name), traced, why)
    dynamic.params["names"] = [param]
    return dynamic


def size_finding(
    frame: Frame, param: str, function_name: str, project: Project, refusal: Finding, blocking: list[Use]
) -> Finding | None:
    """``dynamic=True`` for an int whose every blocking use stays symbolic in a dynamic graph: a
    size (a range's ends, a view's shape, a `topk` k), the data of a `torch.tensor([step])`, a bound of a tensor's slice (`freqs[pos : pos + n]`;
    measured on torch 2.13: 2 -> 1, where an int index `x[:, n]` is guarded on every value) or a
    branch's test (guarded on the outcome, not the
    value: a warm-up `if step < warmup` compiles once per side); None where one is a dim, a
    window, a loop count, an index into a list, or a `min`/`max` whose result goes where the
    analysis stops, which torch guards on the value."""
    symbolic = [u for u in blocking if u.kind in ("branch", "slice", "tensor_data") or u.op in SYMBOLIC_SIZE_CALLS]
    if not blocking or len(symbolic) < len(blocking) or any(u.kind not in _SYMBOLIC_KINDS for u in blocking):
        return None
    dynamic = dynamic_compile_finding(frame, "int", param, function_name, project, refusal, _instead(refusal))
    if dynamic is not None:
        dynamic.params["read_by_code"] = True  # under safe fixes it stays a number the code reads
    return dynamic


def float_fallback(
    frame: Frame, param: str, function_name: str, project: Project, findings: list[Finding]
) -> list[Finding]:
    """``dynamic=True`` as the fallback of a float's 0-d tensor where that one is unsafe (it may
    round; a float traced as an input stays a Python float in the code)."""
    if not any(f.safety is Safety.UNSAFE for f in findings):
        return []
    why = ["the 0-d tensor is unsafe here (its notes say why); a float traced as an input computes as before"]
    dynamic = dynamic_compile_finding(frame, "float", param, function_name, project, findings[0], why)
    if dynamic is None:
        return []
    dynamic.fallback = True
    dynamic.notes.append("tried where the 0-d tensor is not kept")
    return [dynamic]


def float_candidate(
    frame: Frame, param: str, function_name: str, project: Project, refusal: Finding, read: list[Use]
) -> Finding | None:
    """``dynamic=True`` for a float no 0-d tensor can replace (it fills a slot torch reads as a
    Python number: `torch._foreach_lerp_(..., weight=1 - decay)`, an EMA's ramped decay): traced
    as a float input from the first compile, it stays a Python float in the code. Whether torch
    keeps it symbolic there or guards on it again is the run's to show (measured on torch 2.13:
    the `_foreach_lerp_` weight, 2 -> 1 compiles, bit for bit); None where the call is not found.
    ``read``: the uses where the compiled code reads the number."""
    dynamic = dynamic_compile_finding(frame, "float", param, function_name, project, refusal, _instead(refusal))
    if dynamic is not None:
        dynamic.params["read_by_code"] = bool(read)  # under safe fixes it stays a number the code reads
        # torch may guard on it where a Python number is read all the same: a graph break that
        # shields a prefix (RF005) is not made moot by it
        dynamic.params["may_stay_guarded"] = True
    return dynamic


def _instead(refusal: Finding) -> list[str]:
    """The refusal's notes, read as why no 0-d tensor (the number still gets an edit)."""
    return [n.removesuffix("; no edit") + "; no 0-d tensor" for n in refusal.notes]


def sources_finding(
    dynamic: Finding, frame: Frame, source_name: str, param: str, profile: Profile, project: Project
) -> Finding | None:
    """The int ``dynamic`` (``size_finding``'s) makes dynamic with every tensor size, named alone
    instead: ``torch.compiler.config.dynamic_sources = "L['offset']"`` after the imports of the
    compiled function's file (torch >= 2.7, RF006's config for a module's int). torch traces that
    one int as a symbolic int from the first compile (a value 0 or 1 included) and specialises it
    where code needs its value, as automatic dynamic does after a change: the same graph, bit for
    bit, and nothing else made dynamic (measured on torch 2.13: `arange(offset, offset + n)` at
    offsets 0..12, 2 -> 1 compiles). The config names a frame's local in every frame: where
    another compiled frame of the run had an argument of that name, the finding holds on only if
    RF002 names that one too (``settle_shared_names``; two functions' rotary ``offset``), else it is
    ``dynamic`` again. None where the file sets the config already, or where the number reached
    the frame through a wrapper's ``*args``/``**kwargs``.
    Under ``dynamic=False`` too (RF006's config is): the tensors' sizes stay static as asked, and
    the int compiles once instead of once per value (measured: `x.view(rows, -1)`, 4 -> 1)."""
    if profile.torch_release is None or not DYNAMIC_SOURCES.runs_on(profile.torch_release):
        return None
    if source_name != param or not _IDENTIFIER.match(param):
        return None  # a wrapper's `*args`/`**kwargs` item
    sharing = [
        other for other in profile.frames if other is not frame and any(param in c.inputs for c in other.compiles)
    ]
    source = project.source(frame.file)
    if source is None or sets_config(source, {"dynamic_sources"}):
        return None
    statement = f"torch.compiler.config.dynamic_sources = \"L['{param}']\""
    named = Finding(
        rule=dynamic.rule,
        file=frame.file,
        location=dynamic.location if dynamic.file == frame.file else Location(frame.file, frame.first_line),
        message=dynamic.message.rsplit(": ", 1)[0]
        + f": make `{param}` dynamic with `torch.compiler.config.dynamic_sources`",
        safety=Safety.SAFE,
        evidence=dynamic.evidence,
        notes=[
            dynamic.notes[0],
            f"`dynamic_sources` makes only `{param}` a symbolic int from the first compile (torch >= 2.7; "
            "under `dynamic=False` too); the tensors' sizes stay as they were",
        ],
        covers=dynamic.covers,
        params={"config": statement, "config_file": frame.file, "at": source.import_insertion_offset()},
    )
    named.params["frame"] = list(frame.key)
    if sharing:  # kept only where those frames' own ints are named too
        named.params["shared_with"] = [list(other.key) for other in sharing]
        named.params["instead"] = dynamic.to_json()
    return named


def settle_configs(findings: list[Finding]) -> list[Finding]:
    """The ``dynamic_sources`` findings of a plan, settled: names other frames share, then one
    statement per file."""
    return one_config_per_file(settle_shared_names(findings))


def settle_shared_names(findings: list[Finding]) -> list[Finding]:
    """A ``dynamic_sources`` finding whose name is also an argument of other compiled frames holds
    where RF002 names it for each of them too (the same int, changing, used as a size there);
    else it becomes its ``dynamic=True`` again: the config would make another frame's int dynamic
    where that frame may need its value."""
    named = {
        (tuple(f.params["frame"]), f.params["config"].split(" = ", 1)[1]) for f in findings if "config" in f.params
    }
    out = []
    for finding in findings:
        shared = finding.params.pop("shared_with", None)
        instead = finding.params.pop("instead", None)
        value = finding.params.get("config", " = ").split(" = ", 1)[1]
        if shared and not all((tuple(key), value) in named for key in shared):
            finding = Finding.from_json(instead)
        finding.params.pop("frame", None)
        out.append(finding)
    return out


def config_edits(finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
    """``sources_finding``'s statement, on a line of its own after the file's imports."""
    at = finding.params["at"]
    statement = finding.params["config"].replace("torch.", f"{torch_name}.", 1)
    prefix = "" if at == 0 or source.text[:at].endswith("\n\n") else "\n"
    return [Edit(finding.file, at, at, f"{prefix}{statement}\n", finding.rule)]


def config_present(finding: Finding, source: SourceFile) -> str | None:
    """The line that names the int in ``dynamic_sources`` already (ours, or the user's)."""
    wanted = finding.params["config"].split(" = ", 1)[1]
    for number, line in enumerate(source.lines, 1):
        if "dynamic_sources" in line and wanted in line:
            return f"line {number}: `{line.strip()}`"
    return None


def one_config_per_file(findings: list[Finding]) -> list[Finding]:
    """One ``dynamic_sources`` statement per file, naming every int its findings name (two
    statements would each replace the other's list, and two edits at one place overlap)."""
    first_of: dict[str, Finding] = {}
    out: list[Finding] = []
    for finding in findings:
        if "config" not in finding.params:
            out.append(finding)
            continue
        first = first_of.setdefault(finding.file, finding)
        if first is finding:
            out.append(finding)
            continue
        names = [*_config_names(first), *(n for n in _config_names(finding) if n not in _config_names(first))]
        first.params["config"] = f'torch.compiler.config.dynamic_sources = "{",".join(names)}"'
        first.covers += [c for c in finding.covers if c not in first.covers]
        first.notes += [n for n in finding.notes if n not in first.notes]
        if len(names) > 1 and "(one config" not in first.message:
            first.message += " (one config for several ints)"
    return out


def _config_names(finding: Finding) -> list[str]:
    return finding.params["config"].split(" = ", 1)[1].strip('"').split(",")
