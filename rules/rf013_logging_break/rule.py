"""RF013 logging-break: a ``logging.Logger`` call in compiled code breaks its graph on every call;
where it is transformers' warning for an unset ``loss_type``, setting the loss it falls back to
removes it (safe), elsewhere Dynamo can be told to skip that logger's method (unsafe)."""

from __future__ import annotations

from typing import Any

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.call_site_code import (
    compiled_module,
    find_compile_call,
    root_name,
    scope_statement,
    statement_start,
)
from recompile_fix.analysis.model_line import model_line
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import Finding, Safety, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, GraphBreak, Location, Profile, is_library_path

__all__ = ["RULE", "LoggingBreak"]

IGNORE_LOGGER_METHODS = TorchApi(
    "torch._dynamo.config.ignore_logger_methods",
    (2, 6),
    "pytorch/pytorch#139403 (first in 2.6.0); measured 2.13.0, 2.14.1 (an alias of "
    "ignore_logging_functions since 2.11)",
)
# transformers' `PreTrainedModel.loss_function` warns (logger.warning_once) on every call where the
# model's class names no loss type (GPT2LMHeadModel and the other `...LMHeadModel`s), then uses
# ForCausalLM's loss: under torch.compile that warning is a graph break in every forward.
_TRANSFORMERS_LOSS = ("transformers.modeling_utils", "warning_once")
_LOSS_FALLBACK = "ForCausalLM"


class LoggingBreak(Rule):
    """
    ## What it does
    Where a `logging.Logger` method call in compiled code breaks the graph on every call, sets
    what makes the call unnecessary, or tells Dynamo to skip that logger's method, before the
    statement that compiles. transformers' `loss_function` warning for a model whose class names
    no loss type (GPT-2's `GPT2LMHeadModel`) gets `model.loss_type = "ForCausalLM"`, the loss it
    falls back to, before the compile, or, where a compiled function calls the model
    (`@torch.compile def compute_loss(model, ids)`), after the statement that builds the model it
    is passed (a trial's GPT-2 curriculum: 7 -> 2 compiles with RF002's fix); any other logger's
    method gets
    `torch._dynamo.config.ignore_logger_methods.add(logging.getLogger("name").method)`.

    ## Why is this bad?
    Dynamo cannot trace a `logging.Logger` method ("logging.Logger method not supported for
    non-export cases"): the frame is split there on every call, each piece compiles (and
    recompiles for sizes) on its own, and nothing fuses across the split. A tiny GPT-2 trained
    on batches of changing length under `torch.compile(model)`: 11 compiles in 6 frames, 8 with
    the inputs marked dynamic; with `loss_type` set and the marks, 1 compile and no graph break,
    the same losses (torch 2.13, transformers 5.24).

    ## Example
    ```python
    model = GPT2LMHeadModel(config)
    compiled = torch.compile(model)
    ```
    Use instead:
    ```python
    model = GPT2LMHeadModel(config)
    model.loss_type = "ForCausalLM"
    compiled = torch.compile(model)
    ```

    ## Fix safety
    `loss_type = "ForCausalLM"` is safe: it is the loss transformers uses when the attribute is
    unset, so the same loss is computed; only the warning that says so is gone. It is written
    where the object compiled is the model itself (`torch.compile(model)`, `model.compile()`)
    and the compiled frame is a transformers model's `forward`. Skipping a logger's method is
    unsafe (a trade-off): the message is no longer printed from compiled code, though the
    outputs are the same; it needs torch >= 2.6. No edit where the statement that compiles is
    not found in the file of the compiled call.

    ## Profile evidence
    The graph breaks the run recorded, with the logger and its method that torch names in the
    break's debug context (`method: <Logger transformers.modeling_utils (WARNING)>.warning_once`),
    and the user's calls of the compiled frames that broke; for transformers' warning, the frame
    `loss_function` of transformers/modeling_utils.py.
    """

    id = "RF013"
    name = "logging-break"
    message = "a logging call in compiled `{frame}` breaks its graph on every call: {fix}"
    consumes: tuple[str, ...] = ()
    triggers: tuple[str, ...] = ()
    evidence = ("graph_breaks",)
    emits = (IGNORE_LOGGER_METHODS,)
    examples = (
        Example(
            before='compiled = torch.compile(model, backend="eager")\n',
            after=(
                "# transformers warns (a graph break) where the loss type is unset: the loss it uses then.\n"
                'model.loss_type = "ForCausalLM"\ncompiled = torch.compile(model, backend="eager")\n'
            ),
            golden="RF013/loss_type",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings: dict[tuple[Any, ...], Finding] = {}
        for (logger, method), hits in _logging_breaks(profile).items():
            for frame, graph_break in hits:
                for site, _ in frame.call_sites():
                    if site is None or is_library_path(site.file):
                        continue
                    finding = self._at_call(profile, project, frame, graph_break, site, logger, method)
                    if finding is not None:
                        key = (finding.file, str(finding.params.get("before")), logger, method)
                        if key not in findings or _rank(finding) < _rank(findings[key]):
                            findings[key] = finding  # the safe fix where any frame allows it
        # Where the loss type is set in a file, skipping transformers' warning there adds nothing.
        settled = {f.file for f in findings.values() if "loss_type" in f.params}
        return [
            f
            for f in findings.values()
            if not (f.file in settled and (f.params.get("logger"), f.params.get("method")) == _TRANSFORMERS_LOSS)
        ]

    def _at_call(
        self,
        profile: Profile,
        project: Project,
        frame: Frame,
        graph_break: GraphBreak,
        site: Location,
        logger: str,
        method: str,
    ) -> Finding | None:
        source = project.source(site.file)
        call = call_at_site(source, site, frame, project.source) if source is not None else None
        name = root_name(call.func) if call is not None else None
        found = find_compile_call(project, site.file, {name}) if name else None
        statement = scope_statement(found[0], found[1]) if found is not None else None
        breaks = sum(b.count for b in frame.graph_breaks)
        evidence = frame_evidence(frame, [], call_site=f"{site.file}:{site.line}")
        evidence["graph_break"] = f"{graph_break.location.file}:{graph_break.location.line}: {graph_break.reason}"
        evidence["logger"] = f"{logger}.{method}"

        def finding(safety: Safety, fix: str, note: str, location: Location, params=None) -> Finding:
            message = self.message.format(frame=frame.shown_name, fix=fix)
            return Finding(self.id, site.file, location, message, safety, params or {}, evidence, [note])

        breaking = f"`{logger}`'s `{method}` breaks the graph ({breaks} graph breaks)"
        loss_break = (logger, method) == _TRANSFORMERS_LOSS and _transformers_loss_break(profile, frame)
        inside = model_line(profile, project, site.file, source, call) if loss_break and source and call else None
        if inside is not None:  # the model is called in a compiled function: set it where it is built
            return finding(
                Safety.SAFE,
                f'set `{inside.target}.loss_type = "{_LOSS_FALLBACK}"`',
                f"transformers' `loss_function` warns on every call where the model's class names no loss type "
                f'({breaks} graph breaks), then uses "{_LOSS_FALLBACK}": set where the model is built, the same '
                "loss is computed without the warning, and the frames are not split there",
                inside.built,
                {
                    "before": [inside.built.line, inside.built.col or 0],
                    "after": inside.after,
                    "loss_type": inside.target,
                },
            )
        if found is None or statement is None:
            return finding(
                Safety.NONE,
                "no edit",
                f"{breaking}; the statement that compiles what {site.file}:{site.line} calls was not found in "
                f"{site.file}: skip the method there with "
                f'`torch._dynamo.config.ignore_logger_methods.add(logging.getLogger("{logger}").{method})`',
                site,
            )
        compile_source, node, _ = found
        before = list(statement_start(compile_source, statement))
        location = compile_source.location_of(node, site.file)
        target, after = compiled_module(compile_source, node) or (None, False)
        if (logger, method) == _TRANSFORMERS_LOSS and _transformers_loss_break(profile, frame) and target:
            # Where the model is built in the compile call, the compiled module takes the
            # attribute after that statement (it sets it on the model), before its first call.
            where = {"after": compile_source.positions[statement].end.line + 1} if after else {}
            return finding(
                Safety.SAFE,
                f'set `{target}.loss_type = "{_LOSS_FALLBACK}"`',
                f"transformers' `loss_function` warns on every call where the model's class names no loss type "
                f'({breaks} graph breaks), then uses "{_LOSS_FALLBACK}": set, the same loss is computed without '
                "the warning, and the frame is not split there",
                location,
                {"before": before, "loss_type": target, **where},
            )
        if not IGNORE_LOGGER_METHODS.runs_on(profile.torch_release):
            return None
        return finding(
            Safety.UNSAFE,
            f"skip `{logger}`'s `{method}` in compiled code",
            f"{breaking}; skipped, its message is no longer printed from compiled code (the outputs are the "
            "same): a trade-off, yours to take",
            location,
            {
                "before": before,
                "logger": logger,
                "method": method,
                "import_logging": compile_source.imports.get("logging") != "logging",
            },
        )

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        line, column = finding.params["before"]
        indent = source.lines[line - 1][:column]
        if indent.strip():
            raise ValueError(f"line {line} no longer starts the statement that compiles")
        at = source.offset(line, 0)
        if "after" in finding.params:
            after = finding.params["after"]
            at = source.offset(after, 0) if after <= len(source.lines) else len(source.text)
        if "loss_type" in finding.params:
            text = (
                f"{indent}# transformers warns (a graph break) where the loss type is unset: the loss it uses then.\n"
                f'{indent}{finding.params["loss_type"]}.loss_type = "{_LOSS_FALLBACK}"\n'
            )
            return [Edit(finding.file, at, at, text, self.id)]
        logger, method = finding.params["logger"], finding.params["method"]
        text = (
            f"{indent}# A logging call in compiled code breaks its graph: skip this one there.\n"
            f"{indent}{torch_name}._dynamo.config.ignore_logger_methods.add(logging.getLogger({logger!r}).{method})\n"
        )
        edits = [Edit(finding.file, at, at, text, self.id)]
        if finding.params.get("import_logging"):
            top = source.import_insertion_offset()
            edits.insert(0, Edit(finding.file, top, top, "import logging\n", self.id))
        return edits

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        target = finding.params.get("loss_type")
        if target and f"{target}.loss_type" in source.text:
            return f"`{target}.loss_type` is set"
        logger = finding.params.get("logger")
        if logger and ("ignore_logger_methods" in source.text or "ignore_logging_functions" in source.text):
            if repr(logger) in source.text or f'"{logger}"' in source.text:
                return f"`{logger}`'s method is skipped"
        return super().already_present(finding, source)


def _logging_breaks(profile: Profile) -> dict[tuple[str, str], list[tuple[Frame, GraphBreak]]]:
    """{(logger, method): [(frame, break)]}: the graph breaks the run recorded at a logger call."""
    found: dict[tuple[str, str], list[tuple[Frame, GraphBreak]]] = {}
    for frame in profile.frames:
        for graph_break in frame.graph_breaks:
            if graph_break.logger and graph_break.logger_method:
                found.setdefault((graph_break.logger, graph_break.logger_method), []).append((frame, graph_break))
    return found


def _transformers_loss_break(profile: Profile, frame: Frame) -> bool:
    """Is this transformers' `loss_function` warning, broken in a transformers model's code?"""
    in_loss_function = any(
        f.name == "loss_function" and f.file.replace("\\", "/").endswith("transformers/modeling_utils.py")
        for f in profile.frames
    )
    # The compiled frame the user called: the model's forward, or the decorators transformers
    # wraps it in (`wrapper` in transformers/utils/generic.py).
    return in_loss_function and "/transformers/" in frame.file.replace("\\", "/")


def _rank(finding: Finding) -> tuple[int, int]:
    """Safe first; of one safety, the finding about a `forward` (the frame the user called,
    rather than the `loss_function` it broke in)."""
    forward = str(finding.evidence.get("frame", "")).startswith("forward ")
    return [Safety.SAFE, Safety.UNSAFE, Safety.NONE].index(finding.safety), 0 if forward else 1


RULE = LoggingBreak()
