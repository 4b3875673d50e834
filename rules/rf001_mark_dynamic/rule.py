"""RF001 mark-dynamic: a tensor argument whose size changes makes its compiled frame recompile."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.call_site_code import (
    argument_for_base,
    binding_right_before,
    call_runs_before_argument,
    calls_nothing,
    fresh_name,
    is_atomic_expression,
    is_plain_dotted,
    loop_marks_before,
    marks_before,
    name_used_elsewhere,
    node_at_span,
    squeezed_code,
)
from recompile_fix.analysis.call_targets import Base, CallTarget, library_frame, locate, signature_of
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.format import format_statement
from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Finding, Safety, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile, is_library_path
from recompile_fix.profile.resume import is_resume
from recompile_fix.profile.sources import Step
from recompile_fix.rules.rf001_mark_dynamic.compile_call import (
    ISOLATE_RECOMPILES,
    fix_compile_call,
    isolate_finding,
    library_call_finding,
    per_wrapper_sizes,
)
from recompile_fix.rules.rf001_mark_dynamic.graph_dims import parameter_of, refused_by_run
from recompile_fix.rules.rf001_mark_dynamic.size_evidence import SiteEvidence, site_evidence
from recompile_fix.rules.rf001_mark_dynamic.size_uses import SizeUses, unseen_call

__all__ = ["RULE", "MarkDynamic"]

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


class MarkDynamic(Rule):
    """
    ## What it does
    Marks the dimensions of the tensors a call passes to compiled code that changed size between
    its compiles as dynamic, with `torch._dynamo.mark_dynamic(t, dim)` right before the statement
    that makes the call, outside the compiled region. The tensors are found wherever the call
    passes them: a positional or keyword argument, an item of a `**batch` mapping, an attribute
    or item of an object passed in (each layer's keys and values of a cache, marked in a loop),
    an attribute of the module called (`self.cache`); through any wrappers between the call and
    the compiled frame (`functools.wraps` decorators taking `*args, **kwargs`, `nn.Module`).

    ## Why is this bad?
    `torch.compile` specialises a graph on the sizes it first sees. A growing sequence or a
    ragged last batch then compiles the frame again (with `dynamic=False`, once per size, until
    the recompile limit stops compiling it at all). Marking the dimensions before the first call
    compiles one graph that serves every size. Torch names only the first failing guard of a
    recompile; the shapes recorded at each compile show every tensor that changed with it (the
    attention mask beside the ids, a cache's layers), and all of them are marked together.

    ## Example
    ```python
    for batch in loader:
        out = model(batch)
    ```
    Use instead:
    ```python
    for batch in loader:
        torch._dynamo.mark_dynamic(batch, 0)
        out = model(batch)
    ```

    ## Fix safety
    Safe: marking changes no value, and a safe mark never makes the program fail. Evidence is
    per call: a call gets the marks its own compiles show. Dimensions whose sizes moved in
    lock-step at a call are tied (torch relates them in its guards): they are marked together,
    with one safety, never half of them, since a hard mark on one half makes torch specialise it
    through the other and raise `ConstraintViolationError`. The hard `mark_dynamic` is used only
    where the compiled code is the user's own, fully readable, and specialises none of the
    dimensions; where it compares one for equality (`if x.shape[0] == 3`), matches on it
    (`match x.shape[0]:`), looks it up in a dict or list (`TABLE[n]`), calls code the
    analysis cannot read (a model from a package), is library code, or a tied tensor is out of
    the call's reach, the mark is `torch._dynamo.maybe_mark_dynamic`, which cannot raise. Where
    the code tests the size for equality, a call whose size takes the equal branch still compiles
    on its own: the mark is safe only where the literals it is compared with and the recorded
    sizes show it merges compiles (sizes 2, 3, 4, 5 and `== 4`: 3 -> 2); else it is unproven,
    and `fix` keeps it only where a run shows fewer compiles (`case 4:` with 4 as the first
    size merges nothing). A dimension the compiled code loops over (`range(x.size(1))`, a loop over the tensor,
    `x.unbind(1)`) gets no mark, nor do the dimensions tied to it: torch must specialise it,
    so a mark raises or changes nothing. Where the call passed size 0 or 1, which torch
    specialises even when marked, and the compiled code calls nothing (`x + c`), the fix uses
    `torch._dynamo.decorators.mark_unbacked` (torch >= 2.4); elsewhere the finding says why torch
    still compiles twice (a size-1 decode step and a longer prefill are different graphs in
    model code, and `mark_unbacked` or `backed_size_oblivious` make it graph-break there). An
    argument that is not a plain name is bound to a new name first; that is unsafe when other
    parts of the statement run before it and could have side effects. Nothing goes before a call
    that runs on only some evaluations of its statement (a branch of `a if c else b`, an operand
    after `and`/`or`, a comparison after the first of a chain, an `assert`, which `python -O`
    skips) or in a class body (a name bound there becomes a class attribute): there, no fix, and
    the finding says why. Where a parameter or local shadows `torch`, the inserted code names it
    through a module-level `import torch as _torch`. A stride guard on a sliced
    view (`idx[:, -n:]`, whose strides change with its source) is not a size guard: the fix also
    passes a contiguous copy (`.clone(memory_format=torch.contiguous_format)`; `.contiguous()`
    keeps a size-1 batch's odd stride), which changes no value but is unsafe where the name is
    used again after the call. Where library code makes the compiled call (`model.generate()`)
    with tensors it makes itself, no mark in the user's code reaches them: the fix (unsafe) is
    `dynamic=True` at the user's `torch.compile` call, or, where there is none to edit, no fix
    and what to do instead. What the run recorded comes before what the text suggests: a
    dimension the compile's graph specialised (traced as a symbol once it changed, then fixed to
    one value: tied to a parameter's static size, a head's `in_features`, or formatted into a
    string) gets no mark (`mark_dynamic` would raise ConstraintViolationError,
    `maybe_mark_dynamic` would change nothing), nor does a parameter replaced by one of another
    shape (a LoRA rank swap: the object the call holds may have no such parameter). Where such
    a size is tied to the weights of several compiled wrappers that share one frame and hit the
    recompile limit, or the wrappers' own parameters differ in shape (ten heads of different
    widths, each compiled in a loop or comprehension), the fix (unsafe: a trade-off, one compile
    per wrapper, none run eagerly at the limit) is `torch.compile(..., isolate_recompiles=True)`
    at the compile call (torch >= 2.13); one module whose parameter was swapped gets none.

    ## Profile evidence
    `tensor 'x' size mismatch at index 0. expected 32, actual 17` (also `L['x']`, `args[0]`,
    `kwargs['input_ids']`, `kwargs['past_key_values'].layers[0].keys`), and the shapes of every
    tensor reachable from the compiled frame's arguments at each compile.
    """

    id = "RF001"
    name = "mark-dynamic"
    message = "{what} passed to compiled `{frame}` change size ({compiles}): mark them dynamic before the call"
    consumes = ("size_mismatch", "size_specialization", "stride_mismatch")
    triggers = ("compile",)
    emits = (
        MARK_DYNAMIC,
        MAYBE_MARK_DYNAMIC,
        MARK_UNBACKED,
        CONTIGUOUS_COPY,
        BACKED_SIZE_OBLIVIOUS,
        ISOLATE_RECOMPILES,
    )
    examples = (
        Example(
            before="fn(torch.ones(3))\nfn(torch.ones(4))\n",
            after="x = torch.ones(3)\ntorch._dynamo.mark_dynamic(x, 0)\nfn(x)\n"
            "x = torch.ones(4)\ntorch._dynamo.mark_dynamic(x, 0)\nfn(x)\n",
            golden="RF001/seed_shape_change",
        ),
        # `model(**batch)`: every tensor of the batch, tied in both dimensions (ragged last batch).
        Example(
            before="for batch in loader:\n    loss = compiled(**batch)\n",
            after="for batch in loader:\n"
            '    torch._dynamo.mark_dynamic(batch["input_ids"], [0, 1])\n'
            '    torch._dynamo.mark_dynamic(batch["attention_mask"], [0, 1])\n'
            '    torch._dynamo.mark_dynamic(batch["labels"], [0, 1])\n'
            "    loss = compiled(**batch)\n",
            golden="RF001/dict_batch",
        ),
        # A cache passed in: at the decode call, each layer's keys and values, in a loop, with the
        # mask they grow with (maybe_mark_dynamic: not all plain arguments); at the prefill call
        # (an empty cache), the prompt and its mask, plain arguments of readable code.
        Example(
            before="    mask = torch.ones(prompt.shape)\n"
            "    logits = model(input_ids=prompt, attention_mask=mask, past_key_values=cache)\n"
            "    next_id = logits[:, -1:].argmax(-1)\n"
            "    tokens = [next_id]\n"
            "    for _ in range(new_tokens - 1):\n"
            "        mask = torch.cat([mask, torch.ones(next_id.shape)], dim=1)\n"
            "        logits = model(input_ids=next_id, attention_mask=mask, past_key_values=cache)\n",
            after="    mask = torch.ones(prompt.shape)\n"
            "    torch._dynamo.mark_dynamic(prompt, 1)\n"
            "    torch._dynamo.mark_dynamic(mask, 1)\n"
            "    logits = model(input_ids=prompt, attention_mask=mask, past_key_values=cache)\n"
            "    next_id = logits[:, -1:].argmax(-1)\n"
            "    tokens = [next_id]\n"
            "    for _ in range(new_tokens - 1):\n"
            "        mask = torch.cat([mask, torch.ones(next_id.shape)], dim=1)\n"
            "        torch._dynamo.maybe_mark_dynamic(mask, 1)\n"
            "        for layer in cache.layers:\n"
            "            torch._dynamo.maybe_mark_dynamic(layer.keys, 2)\n"
            "            torch._dynamo.maybe_mark_dynamic(layer.values, 2)\n"
            "        logits = model(input_ids=next_id, attention_mask=mask, past_key_values=cache)\n",
            golden="RF001/cache_object",
        ),
        # The sequence length sets a `range()` loop in the compiled code: only the batch is marked.
        Example(
            before="    x = torch.randn(batch, steps, 4)\n    outputs.append(model(x))\n",
            after="    x = torch.randn(batch, steps, 4)\n    torch._dynamo.mark_dynamic(x, 0)\n    outputs.append(model(x))\n",
            golden="RF001/range_loop",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings: list[Finding] = []
        release = profile.torch_release
        uses: dict[tuple[int, str], tuple[cst.FunctionDef, SizeUses]] = {}  # one analysis per function
        # The user's own frames first: a finding merged from several frames speaks of theirs.
        for frame in sorted(profile.frames, key=lambda f: is_library_path(f.file) or os.path.isabs(f.file)):
            if is_resume(frame.name):
                findings.extend(self._plan_resume(frame))
                continue
            for evidence in site_evidence(frame):
                if evidence.changed and evidence.site is not None:
                    findings.extend(_SitePlan(self, evidence, project, release, uses).findings())
        return _merge_same_call(findings)

    def _plan_resume(self, frame: Frame) -> list[Finding]:
        """Code after a graph break takes the live locals as arguments: nothing at a call to mark."""
        dims: dict[str, set[int]] = {}
        for reason in frame.reasons():
            if reason.kind == "size_mismatch" and reason.source and reason.dim is not None:
                dims.setdefault(reason.source, set()).add(reason.dim)
        site = next((c.user_call_site for c in frame.compiles if c.user_call_site), None)
        if site is None:
            return []
        return [
            Finding(
                rule=self.id,
                file=site.file,
                location=site,
                safety=Safety.NONE,
                message=_none_message(source, sorted(found), frame, len(frame.compiles)),
                evidence=frame_evidence(frame, [r for r in frame.reasons() if r.source == source]),
                notes=[f"`{source}` is a local of the code after a graph break, not an argument"],
            )
            for source, found in dims.items()
        ]

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        if "compile_call" in p:
            return fix_compile_call(finding, source)
        call = node_at_span(source, cst.Call, p["call"])
        statement, _ = source.statement_of(call)
        indent = source.statement_indent(statement)
        at = source.offset(source.positions[statement].start.line, 0)
        mark = f"{torch_name}._dynamo.{p['mark']}"
        edits: list[Edit] = []
        statements: list[str] = []
        names = source.names_in_scope(call)
        bases: dict[Base, str] = {}

        def base_text(base: Base, label: str, clone: str = "") -> str:
            if base in bases:
                return bases[base]
            if base.expr is not None:
                bases[base] = base.expr
                return base.expr
            arg = argument_for_base(call, base)
            assert arg is not None, "planned where the call passes it"
            value = arg.value
            if isinstance(value, cst.Name):
                name = value.value
                if clone:
                    # Where the statement before binds the name (`idx_cond = idx[:, -n:]`), copy
                    # there; else in a statement of its own.
                    binding = binding_right_before(source, statement, name)
                    if binding is not None:
                        end = source.span(binding)[1]
                        edits.append(Edit(finding.file, end, end, clone, self.id))
                    else:
                        edits.append(Edit(finding.file, at, at, _indented(f"{name} = {name}{clone}", indent), self.id))
            elif isinstance(value, cst.NamedExpr) and isinstance(value.target, cst.Name):
                # `f(x := make(), c)`: the statement binds `x` itself (`x = make()`), then passes `x`.
                name = value.target.value
                text = source.code(value.value)
                if clone and not is_atomic_expression(value.value):
                    text = f"({text})"
                edits.append(Edit(finding.file, at, at, _indented(f"{name} = {text}{clone}", indent), self.id))
                start, end = source.span(value)
                edits.append(Edit(finding.file, start, end, name, self.id))
            elif is_plain_dotted(value) and not clone:
                name = source.code(value)
            else:
                name = fresh_name(label, names)
                names.add(name)
                text = source.code(value)
                if clone and not is_atomic_expression(value):
                    text = f"({text})"
                edits.append(Edit(finding.file, at, at, _indented(f"{name} = {text}{clone}", indent), self.id))
                start, end = source.span(value)
                edits.append(Edit(finding.file, start, end, name, self.id))
            bases[base] = name
            return name

        for entry in p["marks"]:
            base = Base.from_json(entry["base"])
            clone = f".clone(memory_format={torch_name}.contiguous_format)" if entry.get("contiguous") else ""
            expr = base_text(base, entry["label"], clone) + _steps_code(entry["steps"])
            line = f"{mark}({expr}, {_dims(entry['dims'])})"
            if entry.get("optional"):
                line = f"if {expr} is not None:\n    {line}"
            statements.append(line)
        for loop in p.get("loops", []):
            container = base_text(Base.from_json(loop["base"]), loop["label"]) + _steps_code(loop["container"])
            var = fresh_name(_singular(loop["container"]), names)
            names.add(var)
            lines = [f"{mark}({var}{_steps_code(leaf['steps'])}, {_dims(leaf['dims'])})" for leaf in loop["leaves"]]
            if loop.get("optional") and loop.get("together"):
                # The items' tensors are all there or all None (an empty cache): one test.
                first = f"{var}{_steps_code(loop['leaves'][0]['steps'])}"
                lines = [f"if {first} is not None:"] + [f"    {line}" for line in lines]
            elif loop.get("optional"):
                lines = [
                    f"if {var}{_steps_code(leaf['steps'])} is not None:\n        {line}"
                    for leaf, line in zip(loop["leaves"], lines)
                ]
            statements.append(f"for {var} in {container}:\n" + "\n".join(f"    {line}" for line in lines))
        edits.extend(Edit(finding.file, at, at, _indented(s, indent), self.id) for s in statements)
        return edits

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """Each tensor's mark before the call (``mark_dynamic``, ``maybe_mark_dynamic`` or
        ``mark_unbacked``, ours or hand-written, any spelling of the dims), between the statement
        that binds it and the call, and the contiguous copy where one is needed. Marks of some of
        the tensors or dims narrow the finding to the rest. Loops over a list's items and the
        compile-call fix: the rule's own edits made again (the default). A loop over a list's
        items (``for layer in cache.layers:``, any name for the item) that marks each leaf's dims
        holds that loop's marks."""
        p = finding.params
        if "compile_call" in p or not (p.get("marks") or p.get("loops")):
            return super().already_present(finding, source)
        try:
            call = node_at_span(source, cst.Call, p["call"])
        except StopIteration:
            return None
        statement, _ = source.statement_of(call)
        if statement is None:
            return None
        remaining, lines, named = [], set(), []
        remaining_loops = []
        for loop in p.get("loops", []):
            container = _marked_expression(source, call, {"base": loop["base"], "steps": loop["container"]})
            leaves, line = loop_marks_before(source, statement, container) if container else ({}, None)
            if line is None or any(
                not set(leaf["dims"]) <= leaves.get(squeezed_code(_steps_code(leaf["steps"])), set())
                for leaf in loop["leaves"]
            ):
                remaining_loops.append(loop)
                continue
            lines.add(line)
            named.append(f"each of `{container}`")
        for entry in p.get("marks", []):
            expr = _marked_expression(source, call, entry)
            if expr is None:
                remaining.append(entry)  # the fix binds it to a new name: nothing of it is there yet
                continue
            marked, copied = marks_before(source, statement, expr)
            if entry.get("contiguous") and copied is None:
                remaining.append(entry)  # the copy goes first, and the marks must be on it: all of it
                continue
            missing = [d for d in entry["dims"] if d not in marked]
            if missing:
                remaining.append({**entry, "dims": missing, "contiguous": False})
                continue
            lines |= {marked[d] for d in entry["dims"]} | ({copied} if entry.get("contiguous") and copied else set())
            named.append(f"`{expr}` in dim {_dim_text(entry['dims'])}")
        if remaining or remaining_loops:
            own = super().already_present(finding, source)  # the fix made again, as it writes it
            if own is None:
                p["marks"] = remaining
                p["loops"] = remaining_loops
            return own
        return f"line {', '.join(map(str, sorted(lines)))}: already marked dynamic: {'; '.join(named)}"


# -- one call site ---------------------------------------------------------------------------


@dataclass
class _Mark:
    """One tensor (or, in a loop, one leaf of every item) and the dimensions to mark."""

    target: CallTarget
    dims: set[int] = field(default_factory=set)


class _SitePlan:
    """The finding for one call of one compiled frame."""

    def __init__(
        self,
        rule: MarkDynamic,
        evidence: SiteEvidence,
        project: Project,
        release: tuple[int, int] | None,
        uses: dict[tuple[int, str], tuple[cst.FunctionDef, SizeUses]] | None = None,
    ):
        self.rule = rule
        self._uses = {} if uses is None else uses
        self.ev = evidence
        self.frame = evidence.frame
        self.site: Location = evidence.site  # type: ignore[assignment]
        self.project = project
        self.release = release
        self.library = next((c.library_frames for c in evidence.compiles if c.library_frames), [])
        self.here = len(evidence.compiles)

    # A finding, with the evidence of this call.
    def finding(self, message: str, safety: Safety, notes: list[str], location: Location | None = None) -> Finding:
        guards = [r for r in self.ev.reasons if r.kind in self.rule.consumes]
        return Finding(
            rule=self.rule.id,
            file=(location or self.site).file,
            location=location or self.site,
            safety=safety,
            message=message,
            evidence=frame_evidence(
                self.frame,
                guards,
                call_site=f"{self.site.file}:{self.site.line}",
                compiles_here=self.here,
            ),
            notes=notes,
        )

    def none(self, why: list[str]) -> list[Finding]:
        # The tensor torch's own guard names, where one does.
        named = [r.source for r in self.ev.reasons if r.source in self.ev.changed]
        first = named[0] if named else sorted(self.ev.changed)[0]
        return [
            self.finding(_none_message(first, sorted(self.ev.changed[first]), self.frame, self.here), Safety.NONE, why)
        ]

    def findings(self) -> list[Finding]:
        source = self.project.source(self.site.file)
        site = self.site
        # On a line without spans (PYTHONNODEBUGRANGES=1), the call that can take the recorded arguments.
        call = call_at_site(source, site, self.frame, self.project.source) if source else None
        if source is None or call is None:
            return self.none([f"no call found at {site.file}:{site.line}"])
        statement, why = source.statement_of(call)
        if why:  # no mark can go before this call; a fix at the compile call still can
            return self._isolated(source, call, [why]) or self.none([why])
        signature = signature_of(self.frame, self.project)
        located = {src: locate(self.frame, self.ev.compiles, src, call, source, signature) for src in self.ev.changed}
        func, func_source = self._compiled_function()

        kept: list[tuple[str, int]] = []
        notes: list[str] = []
        partial: list[str] = []
        lost: list[str] = []
        for group in self.ev.groups:
            refused = refused_by_run(group, self.ev.compiles + self.ev.linked, self.frame.compiles)
            if refused:
                notes.append(refused)
                continue
            looped = self._looped(group, located, func, func_source)
            if looped:
                notes.append(looped)
                continue
            missing = [(src, d) for src, d in group if located[src][0] is None]
            reachable = [(src, d) for src, d in group if located[src][0] is not None]
            if not reachable:
                lost.extend(f"`{src}` dim {d}: {located[src][1]}" for src, d in group)
                continue
            kept.extend(reachable)
            for src, d in missing:
                partial.append(
                    f"`{src}` dim {d} changes with them, but {located[src][1]}: the marks are "
                    "`maybe_mark_dynamic`, which cannot raise where torch specialises it; torch may "
                    "still recompile for it"
                )
        if not kept:
            if self.library and lost:
                return library_call_finding(self, source, call, lost)
            return self._isolated(source, call, notes + lost) or self.none(notes + lost)

        entries, loops, names = self._layout(source, call, kept, located)
        if not self._marking_helps(kept):
            if self.here < 2:
                return []  # nothing recompiled here: no word about another call's compiles
            small_dims = sorted({f"`{names.get(src, src)}` dim {d}" for src, d in kept if self.ev.small(src, [d])})
            return self.none(
                [
                    f"no edit: marking {', '.join(small_dims) or 'these dimensions'} would not reduce the "
                    f"{self.here} compiles at this call (torch makes a dimension dynamic on its own once "
                    "its size changes; what is left is the floor)",
                    *self._still_compiles(kept, "maybe_mark_dynamic", func, None if func else "", names)[:1],
                ]
            )
        for entry in list(entries):
            if entry["optional"] and any(kind == "item" for kind, _ in entry["steps"]):
                # `batch["mask"]` that some calls lack: a guard `is not None` could not reach it.
                entries.remove(entry)
                partial.append(
                    f"`{names[entry['source']]}` changes with them but is not passed on every call: "
                    "the marks are `maybe_mark_dynamic`, which cannot raise"
                )
        if not entries and not loops:
            return self.none(notes + partial)
        unseen = (
            unseen_call(func_source, func, self._opaque_params(signature))
            if func is not None and func_source is not None
            else None
        )
        plain = all(located[src][0].param for src, _ in kept)  # type: ignore[union-attr]
        compared = self._compared(kept, located, func, func_source)
        hard = func is not None and not self.library and not partial and plain and not compared and unseen is None
        # The program hard-marks these dims at another call of this frame (a warm-up call before
        # a marked loop): a `maybe_mark_dynamic` graph would not serve its marked tensors
        # ("_dynamo_dynamic_indices should be absent"); the same mark, which ran, serves both.
        # Not for a size 0 or 1 here: torch specialises it, and a hard mark raises there.
        hard = hard or (
            not partial and self._marked_by_program(kept) and not any(self.ev.small(src, [d]) for src, d in kept)
        )
        small = any(self.ev.small(src, [d]) for src, d in kept)
        mark = "mark_dynamic" if hard else "maybe_mark_dynamic"
        if hard and small and MARK_UNBACKED.runs_on(self.release) and calls_nothing(func):
            # An unbacked size breaks the graph wherever torch needs a concrete one (SDPA picks
            # its kernel by size, for one): only code that calls nothing is sure not to.
            mark = "decorators.mark_unbacked"
        notes = notes + partial
        if not hard and not partial:
            notes.append(self._why_maybe(func, compared, unseen))
        copied = {e["source"] for e in entries if e["contiguous"]}
        notes.extend(self._still_compiles(kept, mark, func, unseen, names, copied))

        finding = self.finding("", Safety.SAFE, notes)
        self._fill(finding, source, call, statement, entries, loops, mark)
        if compared and not self._merges_despite_equality(kept, located, func, func_source):
            # A size the code tests for equality (`if x.shape[0] == 4`, `case 4:`) still compiles
            # apart where a call's size takes the equal branch: unless the recorded sizes and the
            # literals show the mark merges compiles, a run proves it (verify/planted.py: 2 -> 2).
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(
                "unproven: the compiled code tests the size for equality, so a size that takes the equal "
                "branch still compiles on its own; `fix` keeps the mark only where a run shows fewer compiles"
            )
        return [finding]

    def _isolated(self, source: SourceFile, call: cst.Call, notes: list[str]) -> list[Finding] | None:
        """`isolate_recompiles=True` where sizes are tied to each wrapper's weights, or parameters
        of another shape sit behind one frame: several compiled modules (ten heads of different
        widths, each compiled) share its cache (not one module whose parameter was swapped)."""
        tied = any(per_wrapper_sizes(group, self.ev.compiles) for group in self.ev.groups)
        swapped = any(parameter_of(src) for group in self.ev.groups for src, _ in group)
        if not (tied or swapped):
            return None
        return isolate_finding(self, source, call, notes, repeated_only=not tied)

    def _marked_by_program(self, kept: list[tuple[str, int]]) -> bool:
        """Did the program itself `mark_dynamic` each of these dims at a recorded compile?"""
        compiles = [c for c in self.ev.compiles + self.ev.linked if c.inputs]
        return bool(kept) and all(
            any(d in (c.inputs.get(src) or {}).get("marked", ()) for c in compiles) for src, d in kept
        )

    def _opaque_params(self, signature: dict[str, Any] | None) -> frozenset[str]:
        """Parameters never recorded as a tensor or a number at this call (a cache object passed
        in): their methods may be a library's."""
        if signature is None:
            return frozenset()
        found = set()
        for param in [*signature.get("positional", []), *signature.get("keyword_only", [])]:
            kinds = {c.inputs.get(param, {}).get("type") for c in self.ev.compiles if c.inputs}
            if param not in ("self", "cls") and kinds and not kinds & {"Tensor", "int", "float", "bool"}:
                found.add(param)
        return frozenset(found)

    def _marking_helps(self, kept: list[tuple[str, int]], apart: dict[tuple[str, int], set[int]] | None = None) -> bool:
        """Would the marks merge any compiles? After marking, the calls still differ where a
        marked size was 0 or 1 (specialised), one of ``apart``'s sizes (a literal the code tests
        it against), or the tensor was None: count those classes."""
        compiles = [c for c in self.ev.compiles + self.ev.linked if c.inputs]
        if not compiles:
            return True  # no shapes recorded: the guards alone say it changed
        classes = set()
        for compile_ in compiles:
            key = []
            for src, d in kept:
                shape = compile_.inputs.get(src, {}).get("shape")
                size = shape[d] if isinstance(shape, list) and d < len(shape) else None
                key.append(size if size is None or size <= 1 or size in (apart or {}).get((src, d), ()) else "n")
            classes.add(tuple(key))
        return len(classes) < len(compiles)

    # -- what the compiled code does with the sizes ----------------------------------------
    def _compiled_function(self) -> tuple[cst.FunctionDef | None, SourceFile | None]:
        """The compiled function, when it is the user's own code and readable."""
        if is_library_path(self.frame.file):
            return None, None
        source = self.project.source(self.frame.file)
        func = source.function_def(self.frame.first_line, self.frame.name) if source else None
        return func, source

    def _looped(
        self,
        group: list[tuple[str, int]],
        located: dict[str, Any],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> str | None:
        if func is None:
            return None
        for src, d in group:
            target = located[src][0]
            if target is None or not target.param:
                continue
            loops = self.size_uses(func, target.param, func_source).loop_dims()
            if d in loops:
                tied = [f"`{s}` dim {e}" for s, e in group if (s, e) != (src, d)]
                also = f" (nor {', '.join(tied)}, tied to it)" if tied else ""
                return (
                    f"`{src}` dim {d} gets no mark{also}: the compiled code feeds it to {loops[d]}, "
                    "which torch specialises: `mark_dynamic` would raise ConstraintViolationError on "
                    "every call and `maybe_mark_dynamic` would change nothing"
                )
        return None

    def size_uses(self, func: cst.FunctionDef, param: str, source: SourceFile | None) -> SizeUses:
        """What ``func`` does with ``param``'s sizes, analysed once per plan (every frame and
        call of a function asked again: 35 ms a frame)."""
        key = (id(func), param)
        if key not in self._uses:
            self._uses[key] = (func, SizeUses(func, param, source))  # func kept: its id stays its own
        return self._uses[key][1]

    def _compared(
        self,
        kept: list[tuple[str, int]],
        located: dict[str, Any],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> bool:
        if func is None:
            return False
        for src, d in kept:
            target = located[src][0]
            if target.param and d in self.size_uses(func, target.param, func_source).compared_dims():
                return True
        return False

    def _merges_despite_equality(
        self,
        kept: list[tuple[str, int]],
        located: dict[str, Any],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> bool:
        """With the sizes compared only to literals: each recorded size equal to one (or 0 or 1)
        still compiles on its own, the others share one graph; do fewer classes than compiles
        remain?"""
        if func is None:
            return False
        special: dict[tuple[str, int], set[int]] = {}
        for src, d in kept:
            target = located[src][0]
            uses = self.size_uses(func, target.param, func_source) if target.param else None
            values = uses.compared_values(d) if uses is not None and d in uses.compared_dims() else set()
            if values is None:
                return False
            special[(src, d)] = values
        recorded = any(c.inputs for c in self.ev.compiles + self.ev.linked)  # no sizes: nothing shown
        return recorded and self._marking_helps(kept, special)

    def _why_maybe(self, func: cst.FunctionDef | None, compared: bool, unseen: str | None) -> str:
        if self.library:
            reason = f"library code ({library_frame(self.library[-1])}) makes the compiled call"
        elif func is None:
            reason = (
                f"the compiled code (`{self.frame.name}` in {_short_path(self.frame.file)}) is not the program's own"
            )
        elif compared:
            reason = "the compiled code compares the size for equality"
        elif unseen is not None:
            reason = f"the compiled code calls {unseen}, which the analysis cannot read"
        else:
            reason = "not every tensor is a plain argument of the compiled function"
        return (
            f"`maybe_mark_dynamic`, not `mark_dynamic`: {reason}, and may specialise a size; "
            "`maybe_mark_dynamic` cannot raise where it does"
        )

    def _still_compiles(
        self,
        kept: list[tuple[str, int]],
        mark: str,
        func: cst.FunctionDef | None,
        unseen: str | None,
        names: dict[str, str],
        copied: set[str] | None = None,
    ) -> list[str]:
        """Why torch will still compile after the marks; ``copied``: the strided views the fix
        passes as contiguous copies."""
        notes = []
        small = sorted({f"`{names.get(src, src)}` dim {d}" for src, d in kept if self.ev.small(src, [d])})
        if mark == "decorators.mark_unbacked":
            notes.append(
                "the Profile saw size 0 or 1 in this dimension, which torch specialises even when "
                "marked dynamic: mark_unbacked serves those sizes with the same graph (code that "
                "branches on the size would fail to compile; the compiled code seen does not)"
            )
        elif small:
            if func is not None and unseen is None and not self.library:
                # Suggest only what the Profile's torch has.
                ways = ["start with a larger size"]
                if MARK_UNBACKED.runs_on(self.release):
                    ways.append(
                        "try `torch._dynamo.decorators.mark_unbacked` instead (it graph-breaks wherever the "
                        "compiled code needs a concrete size, e.g. scaled_dot_product_attention: check with "
                        "`recompile-fix verify`)"
                    )
                if BACKED_SIZE_OBLIVIOUS.runs_on(self.release):
                    ways.append(f"set {BACKED_SIZE_OBLIVIOUS.name} = True")
                suggestion = "; " + ", or ".join(ways)
            elif self.library or func is None:
                suggestion = (
                    ". `mark_unbacked` and `backed_size_oblivious` are not suggested: model code takes "
                    "another path for a size-1 input (transformers: `q_length == 1` in masking_utils, "
                    "`is_causal = q_length > 1` in sdpa_attention), so they graph-break there "
                    "(`is_causal must be bool, not SymBool`) and compile more, not less"
                )
            else:
                suggestion = (
                    f"; start with a larger size. `mark_unbacked` and `backed_size_oblivious` are not "
                    f"suggested: the compiled code calls {unseen}, which the analysis cannot read and "
                    "which may need a concrete size (scaled_dot_product_attention does, and graph-breaks)"
                )
            notes.append(
                f"torch will still compile twice: {', '.join(small)} had size 1 (or 0) on some calls, "
                f"which torch specialises even when marked (0/1 specialisation){suggestion}"
            )
        none = []
        for src in self.ev.none_and_tensor():
            name = names.get(src, src)
            if name not in none:
                none.append(name)
        if none:
            notes.append(
                f"torch will still compile twice: `{none[0]}` was None on some calls and a tensor on "
                "others (an empty cache before the prefill, a filled one when decoding): those are "
                "different graphs, and torch compiles each once whatever is marked"
            )
        for src in sorted(self.ev.strided & (copied or set())):
            notes.append(
                f"a stride guard on `{src}`: it is a view whose strides change (e.g. a crop "
                "`x[:, -n:]`), so the fix passes a copy made with "
                "`.clone(memory_format=torch.contiguous_format)` (`.contiguous()` would keep a size-1 "
                "dimension's stride)"
            )
        return notes

    # -- the fix's parameters --------------------------------------------------------------
    def _layout(
        self, source: SourceFile, call: cst.Call, kept: list[tuple[str, int]], located: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
        """The marks (one per tensor, its dimensions together), the loops over a list's items, and
        how the user's code names each guard source (for the notes)."""
        marks: dict[tuple[Base, tuple[Step, ...]], _Mark] = {}
        for src, d in kept:
            target = located[src][0]
            marks.setdefault((target.base, target.steps), _Mark(target)).dims.add(d)
        loops = _loops(list(marks.values()))
        looped = {id(m) for loop in loops for m in loop["members"]}
        entries: list[dict[str, Any]] = []
        labels: dict[Base, str] = {}
        names: dict[str, str] = {}
        for m in sorted(marks.values(), key=lambda m: _order(call, m.target.base)):
            label = labels.setdefault(m.target.base, _label(source, call, m.target))
            names[m.target.source] = label + _steps_code(_steps_json(m.target.steps))
            if id(m) in looped:
                continue
            entries.append(
                {
                    "base": m.target.base.to_json(),
                    "steps": _steps_json(m.target.steps),
                    "dims": sorted(m.dims),
                    "label": label,
                    "source": m.target.source,
                    "optional": m.target.source in self.ev.optional,
                    "contiguous": m.target.source in self.ev.strided
                    and not m.target.steps
                    and m.target.base.expr is None
                    and not m.target.base.star,
                }
            )
        loop_entries = []
        for loop in loops:
            base = loop["base"]
            labels.setdefault(base, _label(source, call, loop["members"][0].target))
            container = labels[base] + _steps_code(_steps_json(loop["container"]))
            presence = {
                tuple(size is not None for size in self.ev.sizes.get((m.target.source, 0), [])) for m in loop["members"]
            }
            for m in loop["members"]:
                names[m.target.source] = f"{container}[*]" + _steps_code(
                    _steps_json(m.target.steps[len(loop["container"]) + 1 :])
                )
            loop_entries.append(
                {
                    "base": base.to_json(),
                    "container": _steps_json(loop["container"]),
                    "leaves": loop["leaves"],
                    "label": labels[base],
                    # Some calls passed the items empty (a cache before its prefill): skip those.
                    "optional": any(m.target.source in self.ev.optional for m in loop["members"]),
                    "together": len(presence) == 1,
                    "sources": [m.target.source for m in loop["members"]],
                }
            )
        # Sources out of reach, and those looped over, by a name the user's code uses.
        for src in self.ev.changed:
            names.setdefault(src, src)
        return entries, loop_entries, names

    def _fill(
        self,
        finding: Finding,
        source: SourceFile,
        call: cst.Call,
        statement: cst.CSTNode,
        entries: list[dict[str, Any]],
        loop_entries: list[dict[str, Any]],
        mark: str,
    ) -> None:
        pos = source.positions[call]
        finding.location = Location(
            file=self.site.file,
            line=pos.start.line,
            end_line=pos.end.line,
            col=pos.start.column,
            end_col=pos.end.column,
            function=self.site.function,
        )
        finding.params = {
            "call": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
            "mark": mark,
            "marks": entries,
            "loops": loop_entries,
        }
        finding.message = _message(entries, loop_entries, self.frame, self.here, len(self.frame.compiles))
        for entry in entries:
            arg = argument_for_base(call, Base.from_json(entry["base"])) if "expr" not in entry["base"] else None
            value = arg.value if arg is not None else None
            if entry["contiguous"] and isinstance(value, cst.Name) and name_used_elsewhere(source, call, value.value):
                finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
                finding.notes.append(
                    f"the fix passes a contiguous copy of `{value.value}`, which the code uses "
                    "again: an in-place write to it after the call would no longer reach the tensor "
                    "it was sliced from"
                )
        for base in {Base.from_json(e["base"]) for e in entries + loop_entries}:
            arg = argument_for_base(call, base) if base.expr is None else None
            if (
                arg is not None
                and not is_plain_dotted(arg.value)
                and call_runs_before_argument(source, statement, call, arg)
            ):
                finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
                finding.notes.append(
                    "binding the argument to a name moves its evaluation before other calls in the statement"
                )
                break


# -- helpers: planning -----------------------------------------------------------------------


def _loops(marks: list[_Mark]) -> list[dict[str, Any]]:
    """Marks of the items of one list (``cache.layers[0].keys``, ``cache.layers[1].keys``, ...,
    ``.values``) become one loop over it, when two or more items have the same leaves."""
    by_container: dict[tuple[Base, tuple[Step, ...]], dict[int, list[_Mark]]] = {}
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
                (_steps_code(_steps_json(m.target.steps[len(container) + 1 :])), tuple(sorted(m.dims))) for m in ms
            )
            for index, ms in items.items()
        }
        if len(items) < 2 or len({tuple(s) for s in shapes.values()}) != 1:
            continue
        first = next(iter(items.values()))
        leaves = [{"steps": _steps_json(m.target.steps[len(container) + 1 :]), "dims": sorted(m.dims)} for m in first]
        loops.append(
            {
                "base": base,
                "container": container,
                "leaves": leaves,
                "members": [m for ms in items.values() for m in ms],
            }
        )
    return loops


def _label(source: SourceFile, call: cst.Call, target: CallTarget) -> str:
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


def _order(call: cst.Call, base: Base) -> int:
    """Marks in the order the call passes their arguments (the callee's attributes last)."""
    arg = argument_for_base(call, base) if base.expr is None else None
    return next((i for i, a in enumerate(call.args) if a is arg), len(call.args))


def _message(entries: list[dict[str, Any]], loops: list[dict[str, Any]], frame: Frame, here: int, total: int) -> str:
    parts = [f"`{e['label']}{_steps_code(e['steps'])}` dim {_dim_text(e['dims'])}" for e in entries]
    for loop in loops:
        leaves = ", ".join(
            f"`{_steps_code(leaf['steps']).lstrip('.')}` dim {_dim_text(leaf['dims'])}" for leaf in loop["leaves"]
        )
        parts.append(f"each of `{loop['label']}{_steps_code(loop['container'])}` ({leaves})")
    compiles = f"{here} compiles" if here == total else f"{here} of its {total} compiles at this call"
    verb = "changes" if len(parts) == 1 and not loops else "change"
    return f"{', '.join(parts)} passed to compiled `{frame.name}` {verb} size ({compiles}): mark {'it' if verb == 'changes' else 'them'} dynamic before the call"


def _none_message(source: str, dims: list[int], frame: Frame, compiles: int) -> str:
    return f"`{source}` of compiled `{frame.name}` changes size in dim {_dim_text(dims)} ({compiles} compiles)"


def _dim_text(dims: list[int]) -> str:
    return ", ".join(map(str, dims))


def _merge_same_call(findings: list[Finding]) -> list[Finding]:
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
        first.notes.extend(n for n in finding.notes if n not in first.notes)
    return merged


# -- helpers: rewriting ----------------------------------------------------------------------


def _steps_json(steps: tuple[Step, ...]) -> list[list[Any]]:
    return [[s.kind, s.key] for s in steps]


def _steps_code(steps: list[list[Any]]) -> str:
    """``.layers[0].keys``, ``["input_ids"]``: as the fix writes them (black's quotes)."""
    return "".join(f".{key}" if kind == "attr" else f"[{json.dumps(key)}]" for kind, key in steps)


def _dims(dims: list[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else str(list(dims))


def _singular(container: list[list[Any]]) -> str:
    """The loop variable for ``cache.layers``: ``layer``."""
    name = str(container[-1][1]) if container and container[-1][0] == "attr" else "item"
    return name[:-1] if name.endswith("s") and len(name) > 2 else "item"


def _short_path(path: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def _marked_expression(source: SourceFile, call: cst.Call, entry: dict[str, Any]) -> str | None:
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
    return name + _steps_code(entry["steps"])


def _indented(statement: str, indent: str) -> str:
    return "".join(indent + line + "\n" for line in format_statement(statement, len(indent)).splitlines())


RULE = MarkDynamic()
