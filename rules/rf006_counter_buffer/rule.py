"""RF006 counter-buffer: an int held in an nn.Module attribute or a module global that changes
between calls (a step counter) recompiles the compiled frame on every change."""

from __future__ import annotations

import os
import re
from typing import Any

from recompile_fix.analysis.changing_values import (
    ATTRIBUTE_SOURCE,
    AttributeState,
    Counter,
    CounterState,
    GlobalState,
    counter_owner,
    in_a_function,
)
from recompile_fix.analysis.compile_calls import sets_config
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import TENSOR, Use, distinct
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.format import format_statement
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.findings.releases import DYNAMIC_SOURCES, TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.profile.sources import attribute_path

__all__ = ["RULE", "CounterBuffer"]


_GLOBAL_SOURCE = re.compile(r"""^G\[['"](?P<name>\w+)['"]\]$""")


assert DYNAMIC_SOURCES.since is not None
DYNAMIC_SOURCES_SINCE = DYNAMIC_SOURCES.since
# Not written: before 2.7 there is no allow_unspec_int_on_nn_module either (pytorch#142829, 2.7;
# 2.6.0 raises AttributeError on it), and from 2.7 dynamic_sources names the one counter.
# Uses where even a dynamic int is specialised on every value: the config cannot help there.
_SPECIALISING = {"range", "convert", "math", "type", "sequence_index"}


class CounterBuffer(Rule):
    """
    ## What it does
    Keeps an int step counter that changes between calls of compiled code (an nn.Module
    attribute `self.num_iter += 1`, or a module global) in a 0-d int64 tensor updated in place:
    `self.register_buffer("num_iter", torch.tensor(0), persistent=False)` in `__init__`, or
    `STEP = torch.tensor(0)` for a global; the `+= 1` then updates the tensor in place. Where a
    tensor would change what the code does, it instead inserts the narrowest config that makes
    torch treat that one int as dynamic: `torch.compiler.config.dynamic_sources = "L['self'].n"`.

    ## Why is this bad?
    `torch.compile` specialises ints read from nn.Module attributes and module globals, whatever
    `dynamic` says: each new value compiles the frame again (`self.num_iter == 1`, `== 2`, ...)
    until the recompile limit stops compiling it and it runs eagerly for the rest of training.

    ## Example
    ```python
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_iter = 0

        def forward(self, x):
            self.num_iter += 1
            return x * self.num_iter
    ```
    Use instead:
    ```python
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("num_iter", torch.tensor(0), persistent=False)
    ```

    ## Fix safety
    The buffer is chosen only when it keeps the behaviour: every write is the one initial
    assignment or an in-place `+=`, `-=`, `*=`, `//=`, `%=` by an int, and every read anywhere in
    the profiled files is tensor arithmetic that stays exact in int64 (results bit-identical). The
    buffer is non-persistent, so `state_dict()` and old checkpoints are unchanged, and it moves
    with `.to(device)`. Otherwise (a read in a Python branch, a print, a plain reassignment) the
    counter stays an int and `torch.compiler.config.dynamic_sources` names it (torch >= 2.7, known
    from the Profile; it also works under `dynamic=False`); older torch has no such config
    (`allow_unspec_int_on_nn_module` is 2.7+ too): no edit there. A counter that reaches
    `range()`, `int()` or `math.*` is specialised on every value even when dynamic: no edit,
    and the finding says why. So is one that indexes or slices what is not a tensor
    (`self.layers[: self.active_layers]` on a ModuleList): Dynamo needs its value there, and a
    dynamic int made it raise `TypeError: slice indices must be integers`.

    ## Profile evidence
    `self.num_iter == 1` (with torch's hint about `allow_unspec_int_on_nn_module`),
    `G['criterion'].num_iter == 3`, `not ___dict_contains('num_iter', self.__dict__)` (the
    counter first created by `+=` over a class attribute), `G['STEP'] == 2` for a global.
    """

    id = "RF006"
    name = "counter-buffer"
    message = (
        "`{name}` is an int that changes between calls of compiled `{frame}` ({values}; {compiles} compiles"
        "{limit}): {fix}"
    )
    consumes = ("module_attribute", "global_value", "attribute_presence", "scalar_value")
    triggers = ("compile",)
    emits = (TorchApi("torch.tensor", None, "every release"), DYNAMIC_SOURCES)
    examples = (
        Example(
            before="class AnnealedKLLoss(nn.Module):\n    num_iter = 0\n\n"
            "    def __init__(self, max_capacity=25.0, capacity_steps=100, gamma=4.0):\n        super().__init__()\n",
            after="class AnnealedKLLoss(nn.Module):\n"
            "    def __init__(self, max_capacity=25.0, capacity_steps=100, gamma=4.0):\n        super().__init__()\n"
            '        self.register_buffer("num_iter", torch.tensor(0), persistent=False)\n',
            golden="RF006/training_step_counter",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        counters: dict[tuple, Counter] = {}
        owners: dict[tuple, tuple[str, str, str] | None] = {}
        for frame in profile.frames:
            # Library code: its globals and attributes are not the user's to edit, but for a module
            # of the project that torch's own wrapper code compiles (`fn`, closed over).
            library = os.path.isabs(frame.file)
            # Every value guard that failed, recorded beside the one torch names: the model's
            # other modules may count too (`enc` beside `dec`), and each is its own counter.
            for reason in frame.value_reasons():
                guarded = reason.source or ""  # as torch spells it: what `dynamic_sources` names
                source = attribute_path(guarded)  # a held module's `self._modules['dec'].n` as `self.dec.n`
                if library and not _project_module(frame, source):
                    continue
                is_int = reason.value_type == "int"
                owner: tuple[str, str, str] | None = None  # an attribute's class (a global's file is in its key)
                key: tuple[str, object, str]
                if reason.kind == "global_value" and is_int:
                    key = ("global", frame.file, _matched(_GLOBAL_SOURCE, source, "name"))
                elif (
                    reason.kind in ("module_attribute", "scalar_value", "attribute_presence")
                    and (match := ATTRIBUTE_SOURCE.match(source))
                    and (is_int or reason.kind == "attribute_presence")
                ):
                    # One counter per class, by identity: two files' `class Net` hold two.
                    root = match.group("root") + match.group("rest")
                    if (frame.key, root) not in owners:
                        owners[frame.key, root] = counter_owner(frame, root, project)
                    owner = owners[frame.key, root]
                    key = ("attribute", owner, match.group("attr"))
                else:
                    continue
                counter = counters.setdefault(key, Counter(kind=key[0], name=key[2], owner=owner))
                counter.add(frame, guarded, reason.value if is_int else None)
        findings: list[Finding] = []
        configs: dict[str, list[Finding]] = {}
        planned: list[tuple[Counter, Finding]] = []
        for counter in counters.values():
            if not counter.values:
                continue  # an attribute that appeared, not an int that changes
            finding = self._plan_counter(counter, profile, project)
            if finding is not None:
                planned.append((counter, finding))
        safe = {s for counter, finding in planned if finding.safety is Safety.SAFE for s in counter.sources}
        for counter, finding in planned:
            held = sorted(s for s in counter.sources if "._modules[" in s)
            if held and finding.safety is Safety.SAFE and (why := _counted_beside(counter, held[0], safe)):
                # This fix alone would only move the recompile to the other counter.
                finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
                finding.notes.append(why)
            if finding.params.get("config"):
                configs.setdefault(finding.file, []).append(finding)
            else:
                findings.append(finding)
        for file_findings in configs.values():
            findings.append(_merge_configs(file_findings))
        return findings

    def _plan_counter(self, counter: Counter, profile: Profile, project: Project) -> Finding | None:
        frame = counter.frames[0]
        files = [p for p in profile.sources if not os.path.isabs(p) and project.source(p) is not None]
        state: CounterState
        if counter.kind == "global":
            state = GlobalState.find(counter, project)
        else:
            state = AttributeState.find(counter, frame, files, project)
        compiles = sum(f.compile_count for f in counter.frames)
        limit = sum(f.limit_hits for f in counter.frames)
        values = counter.values
        shown = ", ".join(map(repr, values[:3])) + (", ..." if len(values) > 3 else "")
        evidence = _evidence(counter, compiles, limit)

        def finding(fix: str, safety: Safety, location: Location, notes: list[str], params=None) -> Finding:
            message = self.message.format(
                name=state.label if state else counter.name,
                frame=frame.shown_name,
                values=shown,
                compiles=compiles,
                limit=", recompile limit hit" if limit else "",
                fix=fix,
            )
            return Finding(
                rule=self.id,
                file=location.file,
                location=location,
                message=message,
                safety=safety,
                params=params or {},
                evidence=evidence,
                notes=notes,
            )

        fallback = counter.first_use or Location(file=frame.file, line=frame.first_line)
        if state is not None and state.why_not and state.why_not_location is not None:
            fallback = state.why_not_location  # where the class is: its file, not another's
        if state is None or state.why_not:
            return finding(
                "it stays an int",
                Safety.NONE,
                fallback,
                [state.why_not if state else f"cannot find where `{counter.name}` is defined"],
            )
        uses = state.reads(frame, project)
        # Module-level code is never traced: `str(model.n)` in the driver loop specialises nothing.
        specialising = [u for u in uses if u.kind in _SPECIALISING and in_a_function(project, u)]
        blocking = [u for u in uses if u.verdict != TENSOR]
        reasons = _not_a_tensor(state, uses, blocking)
        if not reasons and state.buffer is not None:
            params, location = state.buffer
            notes = ["results are bit-identical: every read is int arithmetic with tensors, exact in int64"]
            if limit:
                notes.append("the frame no longer hits the recompile limit")
            return finding("keep it in a 0-d tensor updated in place", Safety.SAFE, location, notes, params)
        if state.buffer is None and state.buffer_why_not:
            reasons.append(state.buffer_why_not)
        notes = [f"not a tensor: {r}" for r in reasons]
        if specialising:
            notes.append("a dynamic int is still specialised on every value there; no edit")
            return finding("it stays an int", Safety.NONE, fallback, notes)
        config = _config(counter, state, profile)
        if isinstance(config, str):
            notes.append(config)
            return finding("it stays an int", Safety.NONE, fallback, notes)
        statement, note = config
        notes.append(note)
        if any(u.kind in ("branch", "compare") for u in blocking):
            notes.append("a branch on it still compiles once per outcome of the test")
        config_source = project.source(state.config_file)
        # The file sets a config that makes ints dynamic already (its own, or ours from a run before).
        if config_source is None or sets_config(config_source, {"dynamic_sources", "allow_unspec_int_on_nn_module"}):
            notes.append(f"{state.config_file} already sets this config or cannot be read; no edit")
            return finding("it stays an int", Safety.NONE, fallback, notes)
        config_location = state.config_location
        assert config_location is not None, "set wherever why_not is not"
        params = {"config": statement, "at": config_source.import_insertion_offset()}
        return finding(
            f"make it dynamic with `{statement.split(' = ')[0]}`", Safety.SAFE, config_location, notes, params
        )

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        edits = []
        if "config" in p:
            statement = p["config"].replace("torch.", f"{torch_name}.", 1)
            prefix = "" if source.text[: p["at"]].endswith("\n\n") or p["at"] == 0 else "\n"
            edits.append(Edit(finding.file, p["at"], p["at"], f"{prefix}{statement}\n", self.id))
            return edits
        value = _tensor_code(p["value"], torch_name)
        for start, end in p.get("delete", []):
            edits.append(Edit(finding.file, start, end, "", self.id))
        if "replace" in p:
            start, end = p["replace"]
            new = f"{p['replace_with']}".format(tensor=value)
            edits.append(Edit(finding.file, start, end, new, self.id))
        if "insert" in p:
            at, indent = p["insert"]
            statement = p["insert_statement"].format(tensor=value)
            text = "".join(indent + line + "\n" for line in format_statement(statement, len(indent)).splitlines())
            edits.append(Edit(finding.file, at, at, text, self.id))
        return edits

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """The config line anywhere in the file, or the rule's own edits made again (the
        default)."""
        statement = finding.params.get("config")
        if statement is not None:
            wanted = statement.replace("torch.", f"{source.torch_alias or 'torch'}.", 1).replace(" ", "")
            for number, line in enumerate(source.lines, 1):
                if line.replace(" ", "").strip() == wanted:
                    return f"line {number}: `{line.strip()}`"
            return None
        return super().already_present(finding, source)


def _project_module(frame: Frame, source: str) -> bool:
    """Whether ``source`` is an attribute of a module of the project that the recorder saw at the
    frame's compiles (by class, defined in a file under the project root)."""
    match = ATTRIBUTE_SOURCE.match(source)
    recorded = frame.module_class(match.group("root")) if match else None
    return recorded is not None and not os.path.isabs(recorded[0])


def _counted_beside(counter: Counter, held: str, safe: set[str]) -> str | None:
    """Why a held module's counter fix may not remove its recompiles alone, or None: the compiles
    it failed in recorded every failing value guard (``Compile.also_failed``), and each other int
    that changed with it has a safe fix of its own."""
    kinds = ("module_attribute", "global_value")
    for frame in counter.frames:
        for compile_ in frame.compiles:
            failed = compile_.value_reasons()
            if not any(r.source in counter.sources for r in failed):
                continue
            if compile_.also_failed is None:
                return (
                    f"the counter of a module the compiled model holds (`{held}`): torch names the first "
                    "guard that failed, and other modules of its class may count too; a run shows whether "
                    "this removes the recompiles (`fix` proves it)"
                )
            others = sorted(
                {r.source for r in failed if r.kind in kinds and r.value_type == "int" and r.source}
                - counter.sources
                - safe
            )
            if others:
                return (
                    f"`{others[0]}` changed in the same calls (recorded) and has no safe fix: this fix alone "
                    "leaves those recompiles; a run shows what it removes (`fix` proves it)"
                )
    return None


def _evidence(counter: Counter, compiles: int, limit: int) -> dict[str, Any]:
    """The frames the counter recompiles, their compiles and limit hits, its values and sources."""
    return {
        "frames": [f"{f.name} ({f.file}:{f.first_line})" for f in counter.frames],
        "compiles": compiles,
        "limit_hits": limit,
        "values": counter.values[:10],
        "sources": sorted(counter.sources),
    }


def _not_a_tensor(state: CounterState, uses: list[Use], blocking: list[Use]) -> list[str]:
    """Why a 0-d tensor cannot hold the counter: a write that would replace it, a read that needs
    an int (``blocking``), a read that float arithmetic makes inexact in int64."""
    inexact = [u for u in uses if u.verdict == TENSOR and not (u.int_exact and u.exact and not u.float64_only)]
    return (
        list(dict.fromkeys(f"{w} at {where}" for w, where in state.bad_writes))
        + [f"`{state.label}` {u.describe()}" for u in distinct(blocking)]
        + [
            f"`{state.label}` reaches tensor arithmetic at {u.where} (`{u.code}`) through `/` or float "
            "arithmetic, which an int64 tensor would round"
            for u in distinct(inexact)
        ]
    )


def _config(counter: Counter, state: CounterState, profile: Profile):
    """The config statement that makes this one int dynamic, and a note; or why there is none."""
    version = profile.torch_release
    if version is None:
        return "the Profile does not say which torch ran, so no config is inserted"
    if version >= DYNAMIC_SOURCES_SINCE:
        sources = ",".join(sorted(_local_form(s) for s in counter.sources))
        return (
            f'torch.compiler.config.dynamic_sources = "{sources}"',
            f"`dynamic_sources` marks only {sources} dynamic (torch >= 2.7; works under dynamic=False too)",
        )
    # allow_unspec_int_on_nn_module arrived with dynamic_sources (2.7): 2.6 raises on it.
    what = "nn.Module int attribute" if counter.kind == "attribute" else "global int"
    return (
        f"torch {profile.torch_version} has no config that makes one {what} dynamic "
        "(`dynamic_sources` and `allow_unspec_int_on_nn_module` arrived in 2.7)"
    )


def _merge_configs(findings: list[Finding]) -> Finding:
    """One config statement per file: several counters share one `dynamic_sources` string."""
    if len(findings) == 1:
        return findings[0]
    first = findings[0]
    names: list[str] = []
    for f in findings:
        value = f.params["config"].split(" = ", 1)[1].strip('"')
        names.extend(n for n in value.split(",") if n not in names and not value == "True")
    if first.params["config"].startswith("torch.compiler.config.dynamic_sources"):
        first.params["config"] = f'torch.compiler.config.dynamic_sources = "{",".join(sorted(names))}"'
    first.notes = [n for f in findings for n in f.notes]
    first.message += f" (one config for {len(findings)} counters)"
    return first


def _local_form(source: str) -> str:
    """``self.n`` as torch names the source: ``L['self'].n`` (globals keep ``G['x']``)."""
    if source.startswith("G["):
        return source
    match = re.match(r"^(\w+)(.*)$", source)
    return f"L['{match.group(1)}']{match.group(2)}" if match else source


def _tensor_code(value: str, torch_name: str) -> str:
    try:
        int(value)
        return f"{torch_name}.tensor({value})"
    except ValueError:
        return f"{torch_name}.tensor({value}, dtype={torch_name}.long)"


RULE = CounterBuffer()


def _matched(pattern: re.Pattern[str], text: str, group: str) -> str:
    """``group`` of ``pattern`` matched at the start of ``text``, which the Profile's reason kind
    promises it holds (a ``global_value`` reason's source is ``G['name']``)."""
    match = pattern.match(text)
    if match is None:
        raise ValueError(f"{text!r} does not match {pattern.pattern}")
    return match.group(group)
