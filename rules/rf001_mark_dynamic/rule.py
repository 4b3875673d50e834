"""RF001 mark-dynamic: a tensor argument whose size changes makes its compiled frame recompile."""

from __future__ import annotations

import ast
import os
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_site_code import (
    argument_for_base,
    binding_right_before,
    fresh_name,
    is_atomic_expression,
    is_plain_dotted,
    loop_marks_before,
    marks_before,
    node_at_span,
    squeezed_code,
)
from recompile_fix.analysis.call_targets import Base
from recompile_fix.analysis.compile_calls import compile_call_of
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile, walk
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Finding, Safety, frame_evidence
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Profile, is_library_path
from recompile_fix.profile.resume import function_of, is_resume
from recompile_fix.rules.rf001_mark_dynamic.compile_call import (
    ISOLATE_RECOMPILES,
    fix_compile_call,
)
from recompile_fix.rules.rf001_mark_dynamic.marks import (
    BACKED_SIZE_OBLIVIOUS,
    CONTIGUOUS_COPY,
    MARK_DYNAMIC,
    MARK_UNBACKED,
    MAYBE_MARK_DYNAMIC,
    dim_text,
    dims_code,
    indented,
    marked_expression,
    merge_same_call,
    none_message,
    singular,
    steps_code,
)
from recompile_fix.rules.rf001_mark_dynamic.parameter_shapes import PARAMETER_SHAPES, fix_parameter_shapes
from recompile_fix.rules.rf001_mark_dynamic.site_plan import SitePlan
from recompile_fix.rules.rf001_mark_dynamic.size_evidence import (
    SiteEvidence,
    borrow_marks,
    share_marks,
    site_evidence,
)
from recompile_fix.rules.rf001_mark_dynamic.size_uses import SizeUses
from recompile_fix.rules.rf001_mark_dynamic.traced_code import traced_around, traced_spans

__all__ = ["RULE", "MarkDynamic"]


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
    attention mask beside the ids, a cache's layers), and all of them are marked together. A
    call that compiled those dimensions dynamic at once only because other calls had changed
    them (an eval loop after a training loop at other lengths: automatic dynamic) gets the same
    mark: with the other calls marked, nothing makes them dynamic there, and it would compile
    static, then again. A call that passes unmarked a tensor the program itself marks at another
    call (a warm-up or a latency probe before a marked loop) gets the program's own mark: torch
    guards whether a tensor was marked at all (RC024), so the marked call compiled again even
    at a size the first graph had.

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
    Safe: marking changes no value, and a safe mark never makes the program fail, where the
    backend runs the graph's ops as they are (eager, aot_eager). Where the run compiled the
    frame with a backend that generates kernels (inductor, the default), the kernel for a
    dynamic size is another kernel: reductions may round differently (a BatchNorm CNN's losses
    2.4e-7 apart) and inductor may guard sizes itself (on CPU, a reduction's `17 <= size <=
    4096`: a ragged batch of 4 still recompiles), so the mark is unproven there (a trade-off
    where the compile call asks for `dynamic=False`: static kernels, one per size, which the mark
    gives away for one dynamic kernel; `--unsafe-fixes` only): `fix` keeps it
    where a run shows fewer compiles and the outputs within assert_close (the mark changes no
    arithmetic of the program, only the kernel; its runs use torch's deterministic algorithms, so
    only that shows: a nanoGPT's two marks keep every bit, a tiny BERT's 3.7e-9 off). Evidence is
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
    skips) or in a class body (a name bound there becomes a class attribute): there the fix is
    `dynamic=True` at the compile call (unproven where it compiles the function alone, for `fix`
    to keep where a run shows fewer compiles; a trade-off elsewhere; none where the call asks
    for `dynamic=False`), else no fix, and the finding says why; no mark either at another call of the frame that compiled once, which marked alone
    would still compile once (its tensors meet no graph of the unmarked call's). Where a parameter or local shadows `torch`, the inserted code names it
    through a module-level `import torch as _torch`. A stride guard on a sliced
    view (`idx[:, -n:]`, whose strides change with its source) is not a size guard: the fix also
    passes a contiguous copy (`.clone(memory_format=torch.contiguous_format)`; `.contiguous()`
    keeps a size-1 batch's odd stride), which changes no value but is unsafe where the name is
    used again after the call. Where library code makes the compiled call (`model.generate()`)
    with tensors it makes itself, no mark in the user's code reaches them: the fix (unsafe) is
    `dynamic=True` at the user's `torch.compile` call, or, where there is none to edit, no fix
    and what to do instead (unproven, not a trade-off, under `backend="eager"`). Where it passes
    some tensors the user holds (`attention_mask=mask`) beside its own copies whose sizes change
    with them, marks on the user's alone change nothing (torch recompiles for the unmarked
    copies): unproven, with that `dynamic=True` as their fallback for `fix` to try. What the run recorded comes before what the text suggests: a
    dimension the compile's graph specialised (traced as a symbol once it changed, then fixed to
    one value: tied to a parameter's static size, a head's `in_features`, or formatted into a
    string) gets no mark (`mark_dynamic` would raise ConstraintViolationError,
    `maybe_mark_dynamic` would change nothing), nor does a parameter replaced by one of another
    shape (a LoRA rank swap: the object the call holds may have no such parameter). Where such
    sizes are parameters' (ten heads of different widths, each compiled, all running
    `nn.Linear.forward`; an adapter swapped for one of another rank) or tied to them, and the call
    compiled three times or more, the fix (safe, torch >= 2.13) turns off
    `torch._dynamo.config.force_parameter_static_shapes` and
    `force_nn_module_property_static_shapes` before the statement that compiles: automatic
    dynamic then treats parameters as it treats inputs, the first shape static, the second a
    dynamic graph that serves the rest (ten heads: 8 compiles and a recompile-limit hit -> 2; a
    rank sweep 4 -> 2; the same outputs). The options are process-wide and change only frames
    whose parameters change shape. Where the compiled module keeps such a size as an int its
    code reads (a `nn.LayerNorm(width)`, `self.width = width`), Dynamo specialises the int
    whatever the options say (measured: heads with a LayerNorm, 8 -> 8): the fix is unproven
    there, and `fix` keeps it only where a run shows fewer compiles. Where the program sets
    them itself, several compiled wrappers
    that share one frame get `torch.compile(..., isolate_recompiles=True)` (unsafe: a trade-off,
    one compile per wrapper, none run eagerly at the limit).

    ## Profile evidence
    `tensor 'x' size mismatch at index 0. expected 32, actual 17` (also `L['x']`, `args[0]`,
    `kwargs['input_ids']`, `kwargs['past_key_values'].layers[0].keys`), and the shapes of every
    tensor reachable from the compiled frame's arguments at each compile, with the dims the
    program marked (`_has_dynamo_dim_marking is present on runtime tensor but was absent at
    compile time`: a mark after an unmarked call).
    """

    id = "RF001"
    name = "mark-dynamic"
    message = "{what} passed to compiled `{frame}` change size ({compiles}): mark them dynamic before the call"
    consumes = ("size_mismatch", "size_specialization", "stride_mismatch", "dim_marking_added")
    triggers = ("compile",)
    emits = (
        MARK_DYNAMIC,
        MAYBE_MARK_DYNAMIC,
        MARK_UNBACKED,
        CONTIGUOUS_COPY,
        BACKED_SIZE_OBLIVIOUS,
        ISOLATE_RECOMPILES,
        PARAMETER_SHAPES,
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
        compiled = {(f.file, f.name) for f in profile.frames if f.graph_breaks}  # code cut at a break
        traced = traced_spans(profile, project)  # no mark goes inside these
        # The user's own frames first: a finding merged from several frames speaks of theirs.
        for frame in sorted(profile.frames, key=lambda f: is_library_path(f.file) or os.path.isabs(f.file)):
            if is_resume(frame.name):
                findings.extend(self._plan_resume(frame))
                continue
            evidence = site_evidence(frame)
            for ev in evidence:
                ev.from_compiled = any(
                    (at.file, at.function) in compiled for c in ev.compiles for at in c.library_frames
                )
            marked: set[tuple[str, int]] = set()
            # Where the program calls other compiled code: a tensor marked here that it also
            # passes there meets that code's graph, which may specialise the size.
            elsewhere = {
                (site.file, site.line)
                for other in profile.frames
                if other is not frame
                for c in other.compiles
                if (site := c.user_call_site) is not None
            }
            planned: list[Finding] = []
            sites = []
            for ev in evidence:
                if ev.changed and ev.site is not None:
                    site_plan = SitePlan(self, ev, project, release, uses, elsewhere)
                    inside = traced_around(traced, ev.site)  # a mark is a call torch forbids in traced code
                    found = site_plan.none([inside]) if inside else site_plan.findings()
                    sites.append((ev, found))
            _moot_alone(sites)
            for _, found in sites:
                planned.extend(found)
                marked |= _marked_dims(found)
            # Calls that got those dims dynamic from the marked calls' changes, after them.
            # Calls that traced unmarked what the program marks at another call (a warm-up).
            for ev in [*(borrow_marks(evidence, marked) if marked else []), *share_marks(frame, evidence)]:
                if ev.site is not None and traced_around(traced, ev.site):
                    continue
                planned.extend(
                    f for f in SitePlan(self, ev, project, release, uses).findings() if f.safety != Safety.NONE
                )
            findings.extend(_under_kernel_backend(planned, frame, profile, project))
        return _one_per_edit(merge_same_call(findings))

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
                message=none_message(source, sorted(found), frame, len(frame.compiles)),
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
        if "config_before" in p:
            return fix_parameter_shapes(finding, source, torch_name)
        call = node_at_span(source, cst.Call, p["call"])
        statement, why = source.statement_of(call)
        if statement is None:  # planned with a statement: the source changed under the finding
            raise ValueError(f"no statement to insert the mark before: {why}")
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
                        edits.append(Edit(finding.file, at, at, indented(f"{name} = {name}{clone}", indent), self.id))
            elif isinstance(value, cst.NamedExpr) and isinstance(value.target, cst.Name):
                # `f(x := make(), c)`: the statement binds `x` itself (`x = make()`), then passes `x`.
                name = value.target.value
                text = source.code(value.value)
                if clone and not is_atomic_expression(value.value):
                    text = f"({text})"
                edits.append(Edit(finding.file, at, at, indented(f"{name} = {text}{clone}", indent), self.id))
                start, end = source.span(value)
                edits.append(Edit(finding.file, start, end, name, self.id))
            elif is_plain_dotted(value) and not clone:
                name = source.code(value)
            else:
                # Another call of the statement may bind its argument too (another finding's fix,
                # `D(fake[:8]) + D(real[i:j])`): each call's name is its own, by its place.
                rank = _binding_rank(source, statement, call)
                name = fresh_name(label if rank == 1 else f"{label}_{rank}", names)
                names.add(name)
                text = source.code(value)
                if clone and not is_atomic_expression(value):
                    text = f"({text})"
                edits.append(Edit(finding.file, at, at, indented(f"{name} = {text}{clone}", indent), self.id))
                start, end = source.span(value)
                edits.append(Edit(finding.file, start, end, name, self.id))
            bases[base] = name
            return name

        # One mark per tensor: one passed twice (`model(input_ids=ids, labels=ids)`) is one
        # expression here, seen through as many arguments and frames.
        # Spelled two ways (`batch['labels']` held by library code, `batch` + `["labels"]` through
        # `**batch`), one tensor is still one mark: keyed by the expression, not its quotes.
        dims_of: dict[tuple[str, bool], list[int]] = {}
        spelled: dict[str, str] = {}
        for entry in p["marks"]:
            base = Base.from_json(entry["base"])
            clone = f".clone(memory_format={torch_name}.contiguous_format)" if entry.get("contiguous") else ""
            expr = base_text(base, entry["label"], clone) + steps_code(entry["steps"])
            expr = spelled.setdefault(_canonical(expr), expr)
            dims = dims_of.setdefault((expr, bool(entry.get("optional"))), [])
            dims.extend(d for d in entry["dims"] if d not in dims)
        for (expr, optional), dims in dims_of.items():
            line = f"{mark}({expr}, {dims_code(dims)})"
            if optional:
                line = f"if {expr} is not None:\n    {line}"
            statements.append(line)
        for loop in p.get("loops", []):
            container = base_text(Base.from_json(loop["base"]), loop["label"]) + steps_code(loop["container"])
            var = fresh_name(singular(loop["container"]), names)
            names.add(var)
            statements.append(_loop_statement(mark, var, container, loop))
        edits.extend(Edit(finding.file, at, at, indented(s, indent), self.id) for s in statements)
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
        if "compile_call" in p or "config_before" in p or not (p.get("marks") or p.get("loops")):
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
            container = marked_expression(source, call, {"base": loop["base"], "steps": loop["container"]})
            leaves, line = loop_marks_before(source, statement, container) if container else ({}, None)
            if line is None or any(
                not set(leaf["dims"]) <= leaves.get(squeezed_code(steps_code(leaf["steps"])), set())
                for leaf in loop["leaves"]
            ):
                remaining_loops.append(loop)
                continue
            lines.add(line)
            named.append(f"each of `{container}`")
        for entry in p.get("marks", []):
            expr = marked_expression(source, call, entry)
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
            named.append(f"`{expr}` in dim {dim_text(entry['dims'])}")
        if remaining or remaining_loops:
            own = super().already_present(finding, source)  # the fix made again, as it writes it
            if own is None:
                p["marks"] = remaining
                p["loops"] = remaining_loops
            return own
        return f"line {', '.join(map(str, sorted(lines)))}: already marked dynamic: {'; '.join(named)}"


def _one_per_edit(findings: list[Finding]) -> list[Finding]:
    """The parameter-shape fix found at several calls of a frame is one edit: the first."""
    seen: set[tuple[str, tuple[int, ...]]] = set()
    kept = []
    for finding in findings:
        at = finding.params.get("config_before")
        if at is not None:
            key = (finding.file, tuple(at))
            if key in seen:
                continue
            seen.add(key)
        kept.append(finding)
    return kept


# Backends that run the traced graph's ops as they are: a size traced dynamic computes the same
# values as one fixed. Others generate kernels per graph (inductor), and the kernel for a
# dynamic size is another kernel.
_VALUE_KEEPING_BACKENDS = {"eager", "aot_eager", "aot_eager_decomp_partition"}


def _under_kernel_backend(findings: list[Finding], frame: Frame, profile: Profile, project: Project) -> list[Finding]:
    """The safe marks of a frame the run compiled with a kernel-generating backend, unproven:
    inductor's kernel for a dynamic size reduces in another order than the static one (a
    BatchNorm CNN's losses 2.4e-7 apart), and on CPU adds guards of its own (a reduction's
    `17 <= size <= 4096`) that can keep a ragged batch recompiling (measured 4 -> 4). A trade-off
    where the compile call asks for `dynamic=False`: the program chose a static kernel per size
    (a trial's bucketed server, "static kernels per bucket"), which a mark gives away."""
    backends = set(frame.backends)
    if profile.backend is not None or not backends or backends <= _VALUE_KEEPING_BACKENDS:
        return findings  # the program's own backend keeps values (or `--backend` chose it)
    static: bool | None = None
    for finding in findings:
        if finding.safety is Safety.SAFE and (finding.params.get("marks") or finding.params.get("loops")):
            if static is None:
                call = compile_call_of(project, frame, function_of(frame.name) or frame.name)
                static = call is not None and call.static
            if static:
                finding.safety, finding.unsafe_because = Safety.UNSAFE, TRADE_OFF
                finding.notes.append(
                    "a trade-off: the compile call asks for `dynamic=False`, a static kernel for each size, "
                    "which the mark gives away for one kernel that serves them all"
                )
                continue
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.tolerance = {
                "why": f"{'/'.join(sorted(backends))} compiles another kernel for the dynamic size",
                "kernel": True,  # the program's arithmetic is unchanged: plain `fix` allows assert_close
            }
            finding.notes.append(
                f"unproven: the run compiled `{frame.name}` with {', '.join(sorted(backends))}, whose kernel for a "
                "dynamic size is not the static size's kernel: reductions may round differently (outputs "
                "close, not bit for bit), and it may guard sizes itself (a CPU reduction: `17 <= size <= "
                "4096`), so a size can still recompile; `fix` keeps it where a run shows fewer compiles and "
                "the outputs within assert_close (the mark changes no arithmetic of the program)"
            )
    return findings


def _moot_alone(sites: list[tuple[SiteEvidence, list[Finding]]]) -> None:
    """No mark, with why, at a call that compiled once, where another call of the frame passes the
    same tensors and can get no mark (inside a comprehension): its compile came from sizes that
    call's graphs did not serve, and marked alone it still compiles once, the other call as
    before (a trial: `[embed(**batch) for ...]` then `embed(**queries)`: the mark kept 3 compiles,
    and a safe `apply` wrote it). Torch guards the mark itself (RC024): its graph serves no
    unmarked call either."""
    for ev, found in sites:
        if len(ev.compiles) != 1:
            continue
        stuck = next(
            (
                other
                for other, theirs in sites
                if other is not ev
                and set(other.changed) & set(ev.changed)
                and theirs
                and not any(f.fixable and (f.params.get("marks") or f.params.get("loops")) for f in theirs)
            ),
            None,
        )
        if stuck is None or stuck.site is None:
            continue
        for finding in found:
            if finding.fixable and (finding.params.get("marks") or finding.params.get("loops")):
                finding.safety, finding.params = Safety.NONE, {}
                finding.message = finding.message.rsplit(": ", 1)[0]
                finding.notes = [
                    f"marked alone it changes nothing: this call compiles once, and the call at line "
                    f"{stuck.site.line}, which passes them too, gets no mark (see its finding)"
                ]


def _marked_dims(findings: list[Finding]) -> set[tuple[str, int]]:
    """The (source, dim) pairs these findings mark, as the frame names them."""
    return {
        (entry["source"], d)
        for f in findings
        if f.safety != Safety.NONE
        for entry in f.params.get("marks", [])
        for d in entry.get("dims", [])
    }


def _loop_statement(mark: str, var: str, container: str, loop: dict[str, Any]) -> str:
    """``for var in container:`` marking each item's leaves, each tested for None where optional."""
    lines = [f"{mark}({var}{steps_code(leaf['steps'])}, {dims_code(leaf['dims'])})" for leaf in loop["leaves"]]
    if loop.get("optional") and loop.get("together"):
        # The items' tensors are all there or all None (an empty cache): one test.
        first = f"{var}{steps_code(loop['leaves'][0]['steps'])}"
        lines = [f"if {first} is not None:"] + [f"    {line}" for line in lines]
    elif loop.get("optional"):
        lines = [
            f"if {var}{steps_code(leaf['steps'])} is not None:\n        {line}"
            for leaf, line in zip(loop["leaves"], lines)
        ]
    return f"for {var} in {container}:\n" + "\n".join(f"    {line}" for line in lines)


RULE = MarkDynamic()


def _binding_rank(source: SourceFile, statement: cst.CSTNode, call: cst.Call) -> int:
    """``call``'s place (1, 2, ...) among the calls of ``statement`` to the same callee
    (`critic(fakes[:8]) - critic(data[i:j])`), whose fixes would bind the same parameter's
    name: distinct per call. (Calls of other callees binding one name are refused by the proof.)"""
    callee = source.code(call.func)
    rank = 0
    for node in walk(statement):
        if isinstance(node, cst.Call) and source.code(node.func) == callee:
            rank += 1
            if node is call:
                return rank
    return 1


def _canonical(expr: str) -> str:
    """``expr`` as Python reads it, whatever its quotes and spaces."""
    try:
        return ast.dump(ast.parse(expr, mode="eval"))
    except SyntaxError:
        return expr
