"""RF002 tensor-scalar: a Python float or int argument whose value changes makes its compiled frame recompile."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_sites import Parameter, call_sites, calls, compiled_function, is_number, is_tensor_call
from recompile_fix.analysis.classes import ClassIndex
from recompile_fix.analysis.cst_walk import is_name
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import BLOCKS, TENSOR, UNKNOWN, ScalarUses, Use, distinct
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.torch_vocabulary import (
    FLOATING,
    makes_tensor,
    zero_d_computes_as_float,
)
from recompile_fix.edits.compile_keyword import compile_keyword_edits, one_per_compile_call
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import DYNAMIC_FLOATS, DYNAMIC_SOURCES, TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.profile.resume import function_of
from recompile_fix.profile.sources import is_resume_stack
from recompile_fix.rules.rf002_tensor_scalar.dynamic_compile import (
    config_edits,
    config_present,
    float_candidate,
    float_fallback,
    settle_configs,
    size_finding,
    sources_finding,
)
from recompile_fix.rules.rf002_tensor_scalar.merging import alone_merges_nothing, others_stay
from recompile_fix.rules.rf002_tensor_scalar.refusal import converted_dtype, other_path, refusal
from recompile_fix.rules.rf002_tensor_scalar.scalar_arguments import (
    ScalarArgument,
    changed_scalars,
    forwards,
    parameter_function,
    parameter_inputs,
    seen_as_none,
)

__all__ = ["RULE", "TensorScalar"]


class TensorScalar(Rule):
    """
    ## What it does
    Passes a Python `float` or `int` argument of a compiled function as a 0-d tensor at the call
    site, `fn(x, torch.tensor(c, dtype=torch.float64))`, when every use of it inside the compiled
    function (and the functions it passes it to) is tensor arithmetic.

    ## Why is this bad?
    `torch.compile` guards a Python number on its value (`c == 0.5`). With `dynamic=False` every
    new value compiles the frame again, until the recompile limit stops compiling it; with
    `dynamic=None` the second value recompiles once more before the number becomes dynamic. A
    0-d tensor is a graph input: one graph serves every value.

    ## Example
    ```python
    @torch.compile(dynamic=False)
    def fn(x, c):
        return x + c

    for i in range(5):
        fn(x, 0.5 + i)
    ```
    Use instead:
    ```python
    for i in range(5):
        fn(x, torch.tensor(0.5 + i, dtype=torch.float64))
    ```

    ## Fix safety
    The rule reads how the compiled function uses the parameter (libcst, following it into
    locals and into functions whose source it can read). Where the value reaches `range()`, a
    Python branch (`if temperature == 0`), `math.*`, a dropout probability, an `eps`, an
    activation setting or a shape, a tensor fails to compile or silently changes the graph: no
    edit, and the finding says which use blocks it. Where it is passed to a function whose source
    cannot be read, the fix is unsafe (`--unsafe-fixes`).

    The tensor's dtype keeps the results the same: a float meeting only float tensors of known
    rank >= 1 becomes a float64 0-d tensor (results keep their dtype and are bit-identical, even
    after Python arithmetic on the number first, which float64 does as Python does); a float
    that may meet an integer or 0-d tensor stays at the default dtype (a float64 one would turn
    those results into float64), bit-identical when it meets the tensor directly and unsafe
    when Python arithmetic comes first (float32 rounding); an int becomes an int64 0-d tensor,
    bit-identical unless it goes through `/` or float arithmetic first (then unsafe). Where
    the source does not say what a float meets, the recorder does: the dtype and rank of every
    tensor each compile's graph held a float constant against (`float32:2`); all floating of rank
    >= 1 (and no graph break), a float64 0-d tensor is bit-identical, and the fix safe.

    The calls of the compiled function are wrapped together or none is: where one call's wrap is
    unsafe or has none (a cache hit passing a name), the others' are unsafe too, since a call
    passing a number beside one passing a tensor compiles more than before (an `elif` test and
    its body, two calls on one line). The wrap is made in place, so it keeps the order of
    evaluation in a conditional expression, after `and`/`or` or in an `assert`.

    An int used as a size (`torch.arange(offset, offset + T)`) cannot be a 0-d tensor;
    `torch.compiler.config.dynamic_sources = "L['offset']"` after the imports (torch >= 2.7)
    traces that one int as symbolic from the first compile, as PGO's run 2 does (2 -> 1, bit for
    bit; under `dynamic=False` too). It names a local of every frame: where another compiled
    frame had such an argument, the file sets the config, or the int came through `**kwargs`,
    `dynamic=True` there instead (sizes dynamic too: unproven; a trade-off for a model or static).
    The same `dynamic=True` is the fallback of a float's 0-d tensor where that one is
    unsafe: the float stays a Python float in the code (torch >= 2.6). It is also the candidate
    for a float no 0-d tensor can replace (a slot torch reads as a Python number:
    `torch._foreach_lerp_(ema, params, weight=1 - decay)`, an EMA's ramped decay, 2 -> 1 compiles
    bit for bit): whether torch keeps it symbolic there is the run's to show.

    A type test that only moves a tensor to a device (`if torch.is_tensor(n): n = n.to(loss.device)`)
    decides nothing: a 0-d tensor takes it and computes what the number did. Where the value meets
    a field of a module's output (`unet(x, t).sample`), which the source does not type, the fix is
    unsafe, for `fix` to prove by running it. So is it where the code tests the number's type to
    take a path of its own for a tensor (`if not torch.is_tensor(timesteps):`, as every diffusers
    UNet does): only a run shows what that path computes (`unet(latents, int(t))`: `fix` keeps
    the int64 0-d tensor, 4 -> 1 compiles with the size marks, the same outputs; where the
    tensor's path computes otherwise, the run says so and `fix` drops it). Where the number's
    path makes a tensor of it with a dtype the code names (`torch.tensor([timesteps],
    dtype=torch.long)`, diffusers' UNet2DModel), the 0-d tensor takes that dtype: a float
    timestep is truncated as there (`t.item()` from an Euler schedule: 2 -> 1 compiles, bit
    for bit).

    ## Profile evidence
    `c == 0.5   # return x + c  # program.py:6 in fn` (a value guard on an argument of the
    compiled frame; `L['c']` on older torch), plus the argument's recorded values and the dtypes
    and shapes of the frame's tensor arguments. Every int or float argument whose recorded value
    changed in a recompile is planned too, not only the one the guard names (torch names the
    first failing guard: of two annealed scalars, one). A decorator's `wrapper(*args, **kwargs)`
    spells it `kwargs['num_items_in_batch']`: the parameter of the wrapped function where the
    guard is first used, passed by keyword at the user's call.
    """

    id = "RF002"
    name = "tensor-scalar"
    message = (
        "`{param}` of compiled `{frame}` is a Python {kind} that changes ({values}; {compiles} compiles): "
        "pass it as a 0-d tensor"
    )
    consumes = ("scalar_value",)
    triggers = ("compile",)
    emits = (TorchApi("torch.tensor", None, "every release"), DYNAMIC_FLOATS, DYNAMIC_SOURCES)
    examples = (
        Example(
            before="for i in range(5):\n    fn(torch.ones(3), 0.5 + i)\n",
            after="for i in range(5):\n    fn(torch.ones(3), torch.tensor(0.5 + i, dtype=torch.float64))\n",
            golden="RF002/seed_scalar_loop",
        ),
        Example(  # the loop needs a Python int: no edit
            before="@torch.compile\ndef repeat_double(x, n):\n    for _ in range(n):\n        x = x * 2\n    return x\n",
            after=None,
            golden="RF002/range_count",
        ),
        Example(  # temperature meets tensors through max(t, 1e-5); top_k becomes a size and stays an int
            before="        sample(logits.clone(), temperature, top_k)\n",
            after="        sample(logits.clone(), torch.tensor(temperature, dtype=torch.float64), top_k)\n",
            golden="RF002/sampling_temperature",
        ),
        Example(  # a tensor would take the is_tensor() path, which only a run proves: no safe edit
            before="        denoiser(x, t * 999)\n",
            after=None,
            golden="RF002/timestep_truncated",
        ),
        Example(  # a size: the one int named dynamic (torch >= 2.7)
            before="import torch\n\n\n@torch.compile\ndef rotary(q, offset):\n",
            after="import torch\n\ntorch.compiler.config.dynamic_sources = \"L['offset']\"\n\n\n@torch.compile\ndef rotary(q, offset):\n",
            golden="RF002/rotary_offset",
        ),
        Example(  # a float64 fill is wrong under inductor: no edit
            before="    return torch.full_like(x, value) + x\n",
            after=None,
            golden="RF002/full_like_fill",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings = []
        for frame in profile.frames:
            # A library's frame too (a diffusers forward compiled directly): the edit goes at the
            # user's call (call_sites keeps only lines in the project), never into the library.
            # Every number that changed between its compiles, not only the one a guard names
            # (torch names the first failing guard), and `kwargs['k']` / `args[i]` items of a
            # decorator's wrapper, traced to the wrapped function's parameter.
            in_frame: list[Finding] = []
            kept_numbers: dict[str, Finding] = {}  # numbers the compiled code reads that stay numbers
            for argument in changed_scalars(frame):
                if is_resume_stack(argument.source):
                    continue  # a value computed before a graph break (`___stack1`): no argument to wrap
                planned = self._plan_parameter(frame, argument, project, profile)
                # A number that stays a number under safe fixes (`dynamic=True` is unsafe) stays read.
                read = [
                    f
                    for f in planned
                    if (f.safety is Safety.NONE or "compile_call" in f.params) and f.params.pop("read_by_code", False)
                ]
                if read:
                    kept_numbers.setdefault(argument.source, read[0])
                # A number no guard names that gets no edit may not be guarded at all (torch
                # guards no argument the graph does not read): no finding claims it recompiles.
                if argument.named or any(f.safety is not Safety.NONE for f in planned):
                    in_frame.extend(planned)
            settled = alone_merges_nothing(frame, others_stay(frame, in_frame, kept_numbers))
            findings.extend(one_per_compile_call(settled, frame.shown_name))
        return settle_configs(findings)

    def _plan_parameter(
        self, frame: Frame, argument: ScalarArgument, project: Project, profile: Profile
    ) -> list[Finding]:
        release = profile.torch_release
        values = argument.values
        shown = ", ".join(repr(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
        reasons = [r for r in frame.reasons() if r.source == argument.source and r.kind in self.consumes]
        evidence = frame_evidence(frame, reasons or _hidden_evidence(frame), values=values[:10])
        function_name = function_of(frame.name) or frame.name
        param = argument.name or argument.source
        shown_frame = frame.shown_name if frame.shown_name != frame.name else function_of(frame.name) or frame.name
        count = frame.compile_count
        message = self.message.format(param=param, frame=shown_frame, kind=argument.kind, values=shown, compiles=count)
        covers = [cover(frame, [argument.source], self.consumes)]

        def finding(site: Location, safety: Safety, notes: list[str]) -> Finding:
            no_fix = message.rsplit(": ", 1)[0] + ": it stays a Python number"
            return Finding(self.id, site.file, site, no_fix, safety, evidence=evidence, notes=notes, covers=covers)

        sites = call_sites(frame, function_name)
        if not sites:
            return []
        source = project.source(frame.file)
        compiled_def = compiled_function(source, frame, function_name) if source else None
        if compiled_def is None or source is None:
            return [finding(sites[0], Safety.NONE, [f"cannot read the source of `{function_name}`"])]
        wrapped = parameter_function(source, frame, compiled_def, argument, project.source)
        if wrapped is None and argument.keyword and argument.name:
            wrap = _keyword_wrap(self.id, frame, argument, function_name, message, evidence, covers)
            keyword = Parameter(argument.name, None)
            found = [
                self._at_call(site, call, compiled, keyword, project, wrap, function_name, finding)
                for site, call, compiled in calls(sites, project, frame)
            ]
            return _together([f for f in found if f is not None], function_name)
        if wrapped is None:
            return [
                finding(
                    sites[0],
                    Safety.NONE,
                    [
                        f"`{argument.source}` reaches `{function_name}` through its *args/**kwargs, and neither "
                        "shows whose parameter it is (a wrapper that passes them on as it got them, and a guard's "
                        "first use in the function it calls)"
                    ],
                )
            ]
        # `args[2]` is now the parameter it binds, in the wrapped function's file
        param = argument.name or param
        source, func = wrapped.source, wrapped.func
        message = self.message.format(param=param, frame=shown_frame, kind=argument.kind, values=shown, compiles=count)
        position = Parameter.of(source, func, param)
        if position is None:
            return [finding(sites[0], Safety.NONE, [f"`{param}` is not a parameter of `{func.name.value}`"])]
        if argument.keyword:
            position = Parameter(param, None)  # the wrapper got it in **kwargs: the call names it
        varargs = (frame.signature or {}).get("varargs") or "args"
        tensors = _tensor_inputs(frame, func, argument, forwards(compiled_def, varargs))
        analysis, uses = _parameter_uses(project, source, wrapped.file, func, param, set(tensors))
        refused = refusal(param, func, uses)
        tensor_path = other_path(param, uses) if refused is not None else None
        if refused is not None and tensor_path is None:
            planned = finding(sites[0], Safety.NONE, refused)
            # Guarded where the graph reads it (`math.sqrt`, a fill value, a size); a print runs
            # after a graph break, and a number that reaches nothing may not be guarded at all.
            blocking = [u for u in uses if u.verdict == BLOCKS and u.kind not in ("print", "format")]
            dynamic = _made_dynamic(frame, argument, param, function_name, profile, project, planned, blocking)
            if dynamic is not None:
                return [dynamic]
            if blocking:
                _read_by_code(planned)
            return [planned]
        dtype, exact, why = _dtype(
            argument.kind, [u for u in uses if u.verdict == TENSOR], tensors, frame.float_operands()
        )
        if dtype is _NO_DTYPE:
            return [_read_by_code(finding(sites[0], Safety.NONE, [why]))]
        optional = bool(analysis.none_tests) or seen_as_none(frame, argument.source)
        safety, notes = _wrap_notes(frame, argument, param, shown, exact, why, optional, analysis, uses)
        if tensor_path is not None:  # the code has a path for a tensor: only a run shows what it computes
            dtype, exact, converted = converted_dtype(uses, wrapped.file, func, source, dtype, exact)
            safety, notes = Safety.UNSAFE, notes + tensor_path + converted
        wrap = _Wrap(self.id, message, safety, notes, dtype, exact, param, optional, evidence, covers)
        findings = []
        for site, call, compiled in calls(sites, project, frame):
            one = self._at_call(site, call, compiled, position, project, wrap, function_name, finding)
            if one is not None:
                findings.append(one)
        findings = _together(findings, function_name)
        if argument.kind == "float" and DYNAMIC_FLOATS.runs_on(release):
            findings.extend(float_fallback(frame, param, function_name, project, findings))
        return findings

    def _at_call(
        self,
        site: Location,
        call: cst.Call | None,
        compiled: bool,
        position: Parameter,
        project: Project,
        wrap: _Wrap,
        function_name: str,
        finding: Callable[[Location, Safety, list[str]], Finding],
    ) -> Finding | None:
        """The Finding at one call of the compiled function: the number it passes wrapped, or why
        not; None where it passes a tensor or None already, or a call that did not compile passes
        nothing in that position."""
        if call is None:
            return finding(site, Safety.NONE, [f"no call found at {site.file}:{site.line}"])
        arg, why_not = position.argument_of(call)
        if arg is None:
            assert why_not is not None  # argument_of says why wherever it finds no argument
            return finding(site, Safety.NONE, [why_not]) if compiled else None
        if is_tensor_call(arg.value, project.source(site.file)) or is_name(arg.value, "None"):
            return None
        file = project.source(site.file)
        assert file is not None, "its call was read from it"
        location = file.location_of(call, site.file, site.function)
        param = wrap.param
        site_notes, site_safety = list(wrap.notes), wrap.safety
        if wrap.optional and not is_number(arg.value) and not isinstance(arg.value, (cst.Name, cst.Attribute)):
            return finding(
                location,
                Safety.NONE,
                [
                    f"`{param}` may be None and the call passes `{file.code(arg.value)}`, which a "
                    "None check would evaluate twice"
                ],
            )
        if not compiled:
            site_notes.append(
                f"this call of `{function_name}` did not compile (a cache hit, or not run); it is "
                "wrapped too, so every call passes the same type"
            )
            if not is_number(arg.value):
                site_safety = Safety.UNSAFE
                site_notes.append(
                    "the profiled run did not show what it passes: if it is a tensor already, "
                    "`torch.tensor()` would copy it"
                )
        return Finding(
            rule=wrap.rule,
            file=site.file,
            location=location,
            message=wrap.message,
            safety=site_safety,
            params={
                "arg": list(file.span(arg.value)),
                "dtype": wrap.dtype,
                "param": param,
                **({"optional": True} if wrap.optional and not is_number(arg.value) else {}),
            },
            evidence=wrap.evidence,
            notes=site_notes,
            covers=wrap.covers,
            # Each unsafe reason here (rounding, a use the analysis cannot type, a call
            # the run did not show) is one a run of the program settles.
            unsafe_because=UNPROVEN,
            tolerance=None if wrap.exact else {"why": "a 0-d tensor rounds where the number did not"},
        )

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        if "compile_call" in finding.params:  # an int used as a size: `dynamic=True` where it is compiled
            return compile_keyword_edits(finding.file, finding.params, source, self.id)
        if "config" in finding.params:  # ... or named alone by `dynamic_sources`, after the imports
            return config_edits(finding, source, torch_name)
        start, end = finding.params["arg"]
        value = source.text[start:end]
        dtype = finding.params["dtype"]
        wrapped = (
            f"{torch_name}.tensor({value}, dtype={torch_name}.{dtype})" if dtype else f"{torch_name}.tensor({value})"
        )
        if finding.params.get("optional"):  # None calls keep passing None
            wrapped = f"None if {value} is None else {wrapped}"
        return [Edit(finding.file, start, end, wrapped, self.id)]

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """The argument is already a tensor made from the number (``torch.tensor(c)``, ours or
        hand-written), or the compile call says ``dynamic=True``."""
        if "compile_call" in finding.params:
            if not finding.params.get("present"):
                return None
            return f"line {finding.params['compile_call'][0]}: `dynamic=True`"
        if "config" in finding.params:
            return config_present(finding, source)
        start, end = finding.params["arg"]
        text = source.text[start:end]
        optional = re.match(r"\s*None\s+if\s+.+?\s+is\s+None\s+else\s+(.*)$", text, re.S)  # ours for None calls
        if not makes_tensor(optional.group(1) if optional else text):
            return None
        return f"line {source.text.count(chr(10), 0, start) + 1}: `{source.text[start:end]}`"


@dataclass(frozen=True)
class _Wrap:
    """What every call's Finding for one parameter shares: the rule, message, safety and notes
    of the fix, the 0-d tensor's dtype and whether results stay exact, and the evidence."""

    rule: str
    message: str
    safety: Safety
    notes: list[str]
    dtype: str | None
    exact: bool
    param: str
    optional: bool  # the parameter may be None: the wrap keeps None
    evidence: dict[str, Any]
    covers: list[dict[str, Any]]


def _keyword_wrap(
    rule: str,
    frame: Frame,
    argument: ScalarArgument,
    function_name: str,
    message: str,
    evidence: dict[str, Any],
    covers: list[dict[str, Any]],
) -> _Wrap:
    """The wrap of a number that reached the compiled wrapper's **kwargs and is used where the
    analysis cannot read (a library's code, or no guard shows where): the wrapper got exactly the
    call's keywords, so the call names the number torch guarded. Unproven: a run of the program
    (`fix`) decides, never the source."""
    assert argument.name is not None
    notes = [
        f"`{argument.source}` reaches `{function_name}` through its **kwargs and is used in code the analysis "
        f"cannot read: the call's `{argument.name}=` is the number torch guarded; whether a 0-d tensor "
        "computes the same there is for a run of the program to show (`fix` proves it)"
    ]
    dtype = "float64" if argument.kind == "float" else None  # the number's own value, exactly
    optional = seen_as_none(frame, argument.source)
    return _Wrap(rule, message, Safety.UNSAFE, notes, dtype, False, argument.name, optional, evidence, covers)


def _parameter_uses(
    project: Project, source: SourceFile, file: str, func: cst.FunctionDef, param: str, tensors: set[str]
) -> tuple[ScalarUses, list[Use]]:
    """Every use of ``param`` in ``func``, and the analysis that found them."""
    analysis = ScalarUses(read=project.source, classes=ClassIndex(project))
    uses = analysis.of_parameter(source, file, func, param, tensors)
    if not _serves(uses):
        # Refused: would it serve if the fields of a module's output (`unet(x, t).sample`)
        # held tensors? The source does not say: then the fix is one a run must prove.
        guessing = ScalarUses(read=project.source, classes=ClassIndex(project), output_fields=True)
        guessed = guessing.of_parameter(source, file, func, param, tensors)
        if _serves(guessed) and guessing.fields_taken:
            analysis, uses = guessing, guessed
    return analysis, uses


def _wrap_notes(
    frame: Frame,
    argument: ScalarArgument,
    param: str,
    shown: str,
    exact: bool,
    why: str,
    optional: bool,
    analysis: ScalarUses,
    uses: list[Use],
) -> tuple[Safety, list[str]]:
    """The fix's safety and notes, the same at every call: how exact the tensor is, whether the
    parameter may be None, what the analysis took on trust."""
    hidden = (
        []
        if argument.named
        else [
            f"no guard names `{param}`: torch reports the first failing guard, and `{param}` changed in the "
            f"same compiles ({shown}), so it is guarded on its value too"
        ]
    )
    safety = Safety.SAFE if exact else Safety.UNSAFE
    notes = hidden + [why] + _masked_changes(frame, argument.source)
    if optional:
        notes.append(f"`{param}` may be None (`{param} is None` is tested): calls that pass None keep passing None")
    if analysis.fields_taken:
        safety = Safety.UNSAFE
        fields = ", ".join(f"`{f}`" for f in dict.fromkeys(analysis.fields_taken))
        notes.append(
            f"{fields} taken for a tensor (a field of a module's output; the source does not say what it "
            "holds): a run of the program shows whether the 0-d tensor serves"
        )
    for where in dict.fromkeys(analysis.device_moves):
        notes.append(
            f"`{param}` is tested for a tensor at {where} only to move a tensor to a device: a 0-d tensor "
            "takes that branch and then computes what the number did"
        )
    for use in distinct(u for u in uses if u.verdict == UNKNOWN):
        safety = Safety.UNSAFE
        notes.append(f"`{param}` {use.describe()}: it may need a Python number there")
    return safety, notes


def _together(findings: list[Finding], function_name: str) -> list[Finding]:
    """The calls of one compiled function are wrapped together or not at all: where one call
    keeps passing a number (its fix is unsafe, or it has none) and another passes a tensor, the
    frame compiles a graph for each, and again for each new number: more compiles than before.
    A safe fix beside a call that is not: unsafe, saying which call. Each carries the group's key,
    so that a rewrite that leaves one out leaves out all."""
    sited = [f for f in findings if "arg" in f.params]
    key = ";".join(sorted(f"{f.file}:{f.location.line}:{f.location.col}" for f in sited))
    for f in sited:
        f.params["together"] = f"RF002:{function_name}:{f.params['param']}:{key}"
    held = [f for f in findings if f.safety is not Safety.SAFE]
    if not held or len(findings) < 2:
        return findings
    first = held[0]
    why = "gets no fix" if first.safety is Safety.NONE else "has only an unsafe fix"
    where = f"{first.location.file}:{first.location.line}"
    for f in findings:
        if f.safety is Safety.SAFE:
            f.safety, f.unsafe_because = Safety.UNSAFE, UNPROVEN
            f.notes.append(
                f"the call of `{function_name}` at {where} {why}: wrapping this call alone would make the two "
                "pass different types, and the frame compile for each (every call is fixed together or none is)"
            )
    return findings


def _serves(uses: list[Use]) -> bool:
    """Would a 0-d tensor serve at these uses: none blocks, and one at least is tensor arithmetic
    (or passed where the source cannot be read)?"""
    return not any(u.verdict == BLOCKS for u in uses) and any(u.verdict in (TENSOR, UNKNOWN) for u in uses)


def _hidden_evidence(frame: Frame) -> list:
    """For a number no guard names: the value guards of the compiles it changed in."""
    return [r for r in frame.reasons() if r.kind == "scalar_value"][:3]


def _made_dynamic(frame, argument, param, function_name, profile, project, refusal, blocking) -> Finding | None:
    """The number no 0-d tensor can replace, traced as a symbolic one: an int used as a size named
    alone by ``dynamic_sources`` where torch has it (nothing else made dynamic), else
    ``dynamic=True`` at the compile call; a float's candidate ``dynamic=True``."""
    if argument.kind == "int":
        dynamic = size_finding(frame, param, function_name, project, refusal, blocking)
        named = dynamic and sources_finding(dynamic, frame, argument.source, param, profile, project)
        return named or dynamic
    if DYNAMIC_FLOATS.runs_on(profile.torch_release):
        return float_candidate(frame, param, function_name, project, refusal, blocking)
    return None


def _read_by_code(finding: Finding) -> Finding:
    """A number the compiled code reads where no 0-d tensor can go (``math.sqrt``, a size):
    torch guards it, so it keeps the frame recompiling whatever the other numbers become."""
    finding.params["read_by_code"] = True
    return finding


def _tensor_inputs(
    frame: Frame,
    func: cst.FunctionDef | None = None,
    argument: ScalarArgument | None = None,
    forwards_args: bool = True,
) -> dict[str, dict]:
    """The frame's tensor arguments that are plain names; for a number that reached a wrapper's
    *args/**kwargs, the wrapped function's parameters they bind (`args[1]` -> `x`)."""
    if func is None or argument is None or (not argument.keyword and argument.index is None):
        return {name: entry for name, entry in frame.tensor_inputs().items() if name.isidentifier()}
    tensors: dict[str, dict] = {}
    for compile_ in frame.compiles:
        for name, entry in parameter_inputs(frame, func, argument, compile_, forwards_args).items():
            if entry.get("type") == "Tensor":
                tensors.setdefault(name, entry)
    return tensors


def _masked_changes(frame: Frame, param: str) -> list[str]:
    """Tensor arguments whose shape also changed between compiles: torch reports only the first
    failing guard of each cache entry, so no reason names them (RF001 reads the shapes)."""
    notes = []
    for name in _tensor_inputs(frame):
        shapes = []
        for shape in frame.shapes(name):
            if shape not in shapes:
                shapes.append(shape)
        if len(shapes) > 1 and not any(r.source == name for r in frame.reasons()):
            notes.append(
                f"`{name}` also changed shape between these compiles ({shapes[0]} ... {shapes[-1]}), "
                f"hidden behind the guard on `{param}` (torch reports the first failing guard): "
                "a 0-d tensor does not stop those recompiles (RF001's finding on the call says whether a mark can)"
            )
    return notes


_NO_DTYPE = "no dtype"  # no 0-d tensor keeps the results: no edit


def _dtype(
    kind: str, uses: list[Use], tensors: dict[str, dict], operands: list[str] | None = None
) -> tuple[str | None, bool, str]:
    """The dtype of the 0-d tensor that keeps the results the same, whether they stay
    bit-identical, and why (for the finding's notes); ``_NO_DTYPE`` when none does.
    ``operands``: what the compiled graphs' float constants met (``Frame.float_operands``)."""
    inexact = distinct(u for u in uses if not u.exact)
    close = (
        "; " + ", ".join(f"at {u.where} (`{u.code}`)" for u in inexact) + ": a 0-d tensor there computes "
        "close to the Python number, not bit-identically (pow with a tensor exponent, lerp)"
        if inexact
        else ""
    )
    arith = [u for u in uses if not u.scalar_slot]  # a Scalar slot reads the number, whatever its dtype
    met = {m for u in arith for m in u.meets}
    known = {m: tensors[m] for m in met if m in tensors}
    scalar_math = any(u.scalar_math for u in arith)
    if kind == "int":
        exact = all(u.int_exact for u in uses) and not inexact
        if all(u.int_exact for u in uses):
            why = "wrapped as an int64 0-d tensor: int arithmetic on it is exact, results bit-identical"
            return None, exact, why.replace(", results bit-identical", "") + close if inexact else why
        return (
            None,
            False,
            (
                "wrapped as an int64 0-d tensor: it goes through `/` or float arithmetic before it meets "
                "a tensor, which then runs in float32, not as a Python float: results may differ in the "
                "last bits" + close
            ),
        )
    if not arith:
        slots = ", ".join(sorted({f"`{u.code}`" for u in uses}))
        return (
            "float64",
            not inexact,
            f"it only fills Scalar arguments{f' ({slots})' if slots else ''}: float64 keeps the number exact" + close,
        )
    if met and len(known) == len(met) and all(t.get("dtype") in FLOATING and t.get("shape") for t in known.values()):
        return (
            "float64",
            not inexact,
            (
                f"float64 keeps the results bit-identical: it meets only {_names(known)} "
                "(floating, rank >= 1), whose dtype wins over a 0-d tensor's" + close
            ),
        )
    if operands and all(zero_d_computes_as_float(operand, float64=True) for operand in operands):
        return (
            "float64",
            not inexact,
            (
                "float64 keeps the results bit-identical: every tensor the compiled graphs' float "
                f"constants met is floating, of rank >= 1 ({', '.join(operands)}, as the recorder read "
                "each graph), whose dtype wins over a 0-d tensor's" + close
            ),
        )
    float64_only = distinct(u for u in uses if u.float64_only)
    if float64_only:
        use = float64_only[0]
        return (
            _NO_DTYPE,
            False,
            f"torch takes only a float64 0-d tensor at {use.where} (`{use.code}`; a float32 one breaks the "
            "graph), but it also meets tensors of unknown or integer dtype, or 0-d ones, whose results a "
            "float64 tensor would turn into float64; no edit",
        )
    dtypes = {t.get("dtype") for t in tensors.values()}
    if dtypes and dtypes <= {"float64"}:
        # The run passed only float64 tensors: what the function makes from them is float64, where
        # a float32 0-d tensor would round the number first (a new user's float64 simulation
        # printed other digits). Unproven: a float32 or integer tensor made inside the function
        # would come out float64.
        return (
            "float64",
            False,
            f"the run passed only float64 tensors ({_names(tensors)}): a float64 0-d tensor computes with "
            "them as the Python float did; a float32 or integer tensor made inside would come out float64" + close,
        )
    why = (
        "it meets tensors of unknown or integer dtype, or 0-d ones, where a float64 tensor would make "
        "float64 results: the default float dtype keeps their dtype"
    )
    if not scalar_math and "float64" not in dtypes:
        return None, not inexact, f"{why}; it meets them directly, so results are bit-identical" + close
    return (
        None,
        False,
        f"{why}; Python arithmetic on it first now runs in float32: results may differ in the last bits" + close,
    )


def _names(tensors: dict) -> str:
    return ", ".join(f"`{n}` ({t.get('dtype')}, {len(t.get('shape') or [])}-d)" for n, t in sorted(tensors.items()))


RULE = TensorScalar()
