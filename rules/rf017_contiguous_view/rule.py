"""RF017 contiguous-view: a view passed to compiled code whose strides change at each call (the
last position's logits of a growing sequence) recompiles on its strides alone; the call passes a
contiguous copy."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.call_site_code import argument_for_base, is_atomic_expression
from recompile_fix.analysis.call_targets import CallTarget, locate, signature_of
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Compile, Frame, Location, Profile

from .input_uses import input_use

__all__ = ["RULE", "ContiguousView"]

CONTIGUOUS = TorchApi("torch.Tensor.contiguous", None, "every release")
CONTIGUOUS_FORMAT = TorchApi("torch.contiguous_format", None, "every release")
_STRIDE = "stride_mismatch"


class ContiguousView(Rule):
    """
    ## What it does
    Finds a tensor passed to compiled code whose strides changed between calls while its shape
    did not (a view into a tensor that grows: `logits[:, -1, :]` of a sequence one token longer
    each step), and passes a contiguous copy at the call: `pick_next(logits[:, -1, :].contiguous())`.

    ## Why is this bad?
    Dynamo guards a tensor's strides as well as its sizes (`tensor 'logits' stride mismatch at
    index 0. expected 200, actual 250`): the view of the last position has the same shape at
    every step, but its batch stride is the whole sequence's, so the second step compiles again
    (with the strides dynamic: a graph that serves the rest, with symbolic strides in its
    kernels). A contiguous copy has the same strides at every call: one compile (torch 2.13, a
    decode loop with a compiled sampler: 2 -> 1, the tokens the same).

    ## Example
    ```python
    for _ in range(steps):
        logits = model(ids)
        next_id = pick_next(logits[:, -1, :])
        ids = torch.cat([ids, next_id], dim=1)
    ```
    Use instead:
    ```python
    for _ in range(steps):
        logits = model(ids)
        next_id = pick_next(logits[:, -1, :].contiguous())
        ids = torch.cat([ids, next_id], dim=1)
    ```

    ## Fix safety
    Safe where the copy cannot be told from the view: the compiled function's code is read and
    neither writes into the tensor (or a view of it), nor returns or keeps it, nor passes it to
    code other than torch's; every recompile at the call failed on these strides alone; and the
    innermost dimension was contiguous at every call (only outer strides change, so every kernel
    reads the values in the same order: the same results, bit for bit). Where a recorded shape
    has a dimension of size 1, whose stride `.contiguous()` keeps, the copy is
    `.clone(memory_format=torch.contiguous_format)`. Unsafe, unproven (for `fix` to keep where a
    run shows fewer compiles and the same outputs), where the function's code is not read (a
    library's model), it passes the tensor on to other code, the layout changes in the innermost
    dimension (a transposed view: kernels read it in another order), or other guards failed at every
    one of its recompiles (the copy alone would remove none).
    No finding where the argument is not passed as a plain argument at the call (inside a list,
    through `**kwargs`), and no fix where the function writes into it, returns it or keeps it.
    The copy costs one allocation per call, the size of the view.

    ## Profile evidence
    `tensor 'logits' stride mismatch at index 0. expected 200, actual 250` at recompiles of one
    call site, and the shape and strides the recorder read of that argument at every compile
    there (a stride change with a shape change is RF001's: marks, and the copy beside them).
    """

    id = "RF017"
    name = "contiguous-view"
    message = (
        "{what} passed to compiled `{frame}` {verb} a view whose strides change ({compiles} compiles): "
        "pass a contiguous copy"
    )
    consumes = (_STRIDE,)
    triggers = ("compile",)
    emits = (CONTIGUOUS, CONTIGUOUS_FORMAT)
    finding_only = False
    examples = (
        Example(
            before="        next_id = pick_next(logits[:, -1, :])\n",
            after="        next_id = pick_next(logits[:, -1, :].contiguous())\n",
            golden="RF017/last_token_sampler",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings: list[Finding] = []
        for frame in profile.frames:
            if frame.recompiles == 0:
                continue
            for site, compiles in frame.call_sites():
                if site is not None and len(compiles) > 1:
                    found = self._site(frame, site, compiles, project)
                    if found is not None:
                        findings.append(found)
        return findings

    def _site(self, frame: Frame, site: Location, compiles: list[Compile], project: Project) -> Finding | None:
        strided = _strided_alone(compiles)
        source = project.source(site.file)
        if not strided or source is None:
            return None
        call = call_at_site(source, site, frame, project.source)
        if call is None:
            return None
        signature = signature_of(frame, project)
        targets: list[tuple[str, CallTarget, cst.Arg]] = []
        for src in strided:
            target, _ = locate(frame, compiles, src, call, source, signature)
            arg = argument_for_base(call, target.base) if target is not None and not target.steps else None
            if target is None or arg is None or arg.star or _copied(arg.value):
                continue
            targets.append((src, target, arg))
        if not targets:
            return None
        guards = [r for c in compiles for r in c.reasons if r.kind == _STRIDE and r.source in dict(strided)]
        notes, safety = self._safety(frame, compiles, project, targets, strided)
        if safety is None:
            refused = self._finding(frame, site, source, call, targets, guards, notes, Safety.NONE)
            refused.message = refused.message.rsplit(": ", 1)[0] + ": a copy would not be the same to the caller"
            return refused
        args: list[dict[str, Any]] = []
        for src, _, arg in targets:
            pos = source.positions[arg.value]
            args.append(
                {
                    "span": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
                    "text": source.code(arg.value),
                    "clone": any(1 in shape for shape in strided[src]),
                }
            )
        if any(a["clone"] for a in args):
            notes.append(
                "`.clone(memory_format=torch.contiguous_format)`, not `.contiguous()`: a recorded shape has a "
                "dimension of size 1, whose odd stride `.contiguous()` keeps (and torch guards)"
            )
        finding = self._finding(frame, site, source, call, targets, guards, notes, safety)
        finding.params = {"args": args}
        return finding

    def _safety(
        self,
        frame: Frame,
        compiles: list[Compile],
        project: Project,
        targets: list[tuple[str, CallTarget, cst.Arg]],
        strided: dict[str, list[list[int]]],
    ) -> tuple[list[str], Safety | None]:
        """(notes, SAFE / UNSAFE), or (why not, None) where the copy would change what the caller sees."""
        copied = {src for src, _, _ in targets}
        frame_source = project.source(frame.file)
        func = frame_source.syntax_def(frame.first_line, frame.name) if frame_source is not None else None
        imports = frame_source.imports if frame_source is not None and func is not None else {}
        torch = {name for name, what in imports.items() if what.split(".")[0] == "torch"}
        unproven: list[str] = []
        for src, target, _ in targets:
            param = target.param or src
            why = input_use(func, param, torch) if func is not None else None
            if why is not None and not why.startswith("passes"):
                return [f"no fix: `{frame.name}` {why}; a copy would change what the caller sees"], None
            if func is None:
                unproven.append(f"the code of `{frame.name}` is not read here: a write into `{param}` is not ruled out")
            elif why is not None:
                unproven.append(f"`{frame.name}` {why}: a write into it is not ruled out")
        # A recompile that failed on these strides alone is one the copy removes; at the others it
        # removes compiles only beside the other guards' fixes.
        alone = [
            c
            for c in compiles[1:]
            if c.reasons
            and all(r.kind == _STRIDE and r.source in copied for r in c.reasons + list(c.also_failed or ()))
        ]
        if not alone:
            others = sorted(
                {
                    r.source or r.kind
                    for c in compiles[1:]
                    for r in c.reasons + list(c.also_failed or ())
                    if not (r.kind == _STRIDE and r.source in copied)
                }
            )
            unproven.append(
                f"other guards failed at each of these recompiles too ({', '.join(f'`{o}`' for o in others)}): the "
                "copy removes compiles only beside their fixes"
            )
        inner = [src for src in copied if any(s[-1] != 1 for s in _strides(compiles, src) if s)]
        if inner:
            unproven.append(
                f"`{inner[0]}`'s innermost dimension was not contiguous at every call: kernels read the copy "
                "in another order, which may round otherwise"
            )
        if unproven:
            return [f"unproven: {'; '.join(unproven)}; `fix` keeps the copy only where a run shows fewer compiles and "
                    "the same outputs"], Safety.UNSAFE  # fmt: skip
        return [
            "the copy has the same values and, at every call, the same strides: one compile; the compiled code "
            "neither writes into the tensor nor returns or keeps it"
        ], Safety.SAFE

    def _finding(
        self,
        frame: Frame,
        site: Location,
        source: SourceFile,
        call: cst.Call,
        targets: list[tuple[str, CallTarget, cst.Arg]],
        guards: list[Any],
        notes: list[str],
        safety: Safety,
    ) -> Finding:
        shown = [f"`{source.code(arg.value)}`" for _, _, arg in targets]
        message = self.message.format(
            what=", ".join(shown),
            frame=frame.name,
            verb="is" if len(shown) == 1 else "are each",
            compiles=len(frame.compiles),
        )
        return Finding(
            rule=self.id,
            file=site.file,
            location=source.location_of(call, site.file, site.function),
            message=message,
            safety=safety,
            evidence=frame_evidence(frame, guards, call_site=f"{site.file}:{site.line}"),
            notes=notes,
            covers=[cover(frame, [src for src, _, _ in targets], [_STRIDE])],
            unsafe_because=UNPROVEN,
        )

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        edits = []
        for arg in finding.params["args"]:
            line, col, end_line, end_col = arg["span"]
            start, end = source.offset(line, col), source.offset(end_line, end_col)
            if source.text[start:end] != arg["text"]:
                raise ValueError(f"line {line} no longer passes `{arg['text']}` where the run recorded it")
            node = cst.parse_expression(arg["text"])
            text = arg["text"] if is_atomic_expression(node) else f"({arg['text']})"
            copy = f".clone(memory_format={torch_name}.contiguous_format)" if arg["clone"] else ".contiguous()"
            edits.append(Edit(finding.file, start, end, text + copy, self.id))
        return edits

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """Each argument is a copy already (a Profile recorded before the edit)."""
        args = finding.params.get("args", [])
        lines = [source.lines[a["span"][0] - 1] for a in args if a["span"][0] <= len(source.lines)]
        if args and len(lines) == len(args):
            copies = [_COPY.format(re.escape(a["text"])) for a in args]
            if all(re.search(c, line) for c, line in zip(copies, lines)):
                return f"line {args[0]['span'][0]}: a contiguous copy is passed"
        return super().already_present(finding, source)


_COPY = r"\(?{}\)?\s*\.\s*(?:contiguous\(\s*\)|clone\(\s*memory_format\s*=\s*\w+\.contiguous_format\s*\))"


def _strides(compiles: list[Compile], src: str) -> list[list[int] | None]:
    return [c.inputs.get(src, {}).get("stride") for c in compiles]


def _strided_alone(compiles: list[Compile]) -> dict[str, list[list[int]]]:
    """Sources whose strides failed a guard at a recompile here while their shape never changed:
    source -> its shape at each compile."""
    found: dict[str, list[list[int]]] = {}
    for src in sorted({r.source for c in compiles for r in c.reasons if r.kind == _STRIDE and r.source}):
        entries = [c.inputs.get(src) for c in compiles]
        if not all(isinstance(e, dict) and e.get("type") == "Tensor" for e in entries):
            continue
        shapes = [e.get("shape") for e in entries if e is not None]
        if all(isinstance(s, list) for s in shapes) and all(s == shapes[0] for s in shapes):
            found[src] = [list(s) for s in shapes if s is not None]
    return found


def _copied(value: cst.BaseExpression) -> bool:
    """A copy already (`.contiguous()`, `.clone(...)`)."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("contiguous", "clone")
    )


RULE = ContiguousView()
