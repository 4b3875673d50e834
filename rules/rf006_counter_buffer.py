"""RF006 counter-buffer: an int held in an nn.Module attribute or a module global that changes
between calls (a step counter) recompiles the compiled frame on every change."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.analysis.cst_names import is_load
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import TENSOR, ScalarUses, Use, distinct
from recompile_fix.analysis.source import SourceFile, is_name, walk
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.format import format_statement
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile

__all__ = ["RULE", "CounterBuffer"]

# ``self.num_iter``, ``G['criterion'].num_iter``, ``model.blocks.n``: a root, then attributes.
_ATTRIBUTE_SOURCE = re.compile(r"""^(?P<root>G\[['"]\w+['"]\]|\w+)(?P<rest>(?:\.\w+)*)\.(?P<attr>\w+)$""")
_GLOBAL_SOURCE = re.compile(r"""^G\[['"](?P<name>\w+)['"]\]$""")
_IN_PLACE = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.FloorDivideAssign, cst.ModuloAssign)
# torch.compiler.config.dynamic_sources names one source; it arrived in torch 2.7 (pytorch#147979).
DYNAMIC_SOURCES_SINCE = (2, 7)
# Uses where even a dynamic int is specialised on every value: the config cannot help there.
_SPECIALISING = {"range", "convert", "math", "type"}


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
    from the Profile; it also works under `dynamic=False`); older torch gets
    `torch._dynamo.config.allow_unspec_int_on_nn_module = True` for module attributes and no edit
    for globals. A counter that reaches `range()`, `int()` or `math.*` is specialised on every
    value even when dynamic: no edit, and the finding says why.

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
        counters: dict[tuple, _Counter] = {}
        for frame in profile.frames:
            if os.path.isabs(frame.file):
                continue  # library code: its globals and attributes are not the user's to edit
            for reason in frame.reasons():
                source = reason.source or ""
                is_int = reason.value_type == "int"
                if reason.kind == "global_value" and is_int:
                    key = ("global", frame.file, _GLOBAL_SOURCE.match(source).group("name"))
                elif (
                    reason.kind in ("module_attribute", "scalar_value", "attribute_presence")
                    and _ATTRIBUTE_SOURCE.match(source)
                    and (is_int or reason.kind == "attribute_presence")
                ):
                    key = ("attribute", _ATTRIBUTE_SOURCE.match(source).group("attr"))
                else:
                    continue
                counter = counters.setdefault(key, _Counter(kind=key[0], name=key[-1]))
                counter.add(frame, source, reason.value if is_int else None)
        findings: list[Finding] = []
        configs: dict[str, list[Finding]] = {}
        for counter in counters.values():
            if not counter.values:
                continue  # an attribute that appeared, not an int that changes
            finding = self._plan_counter(counter, profile, project)
            if finding is None:
                continue
            if finding.params.get("config"):
                configs.setdefault(finding.file, []).append(finding)
            else:
                findings.append(finding)
        for file_findings in configs.values():
            findings.append(_merge_configs(file_findings))
        return findings

    def _plan_counter(self, counter: "_Counter", profile: Profile, project: Project) -> Finding | None:
        frame = counter.frames[0]
        files = [p for p in profile.sources if not os.path.isabs(p) and project.source(p) is not None]
        if counter.kind == "global":
            state = _GlobalState.find(counter, project)
        else:
            state = _AttributeState.find(counter, frame, files, project)
        compiles = sum(len(f.compiles) for f in counter.frames)
        limit = sum(f.limit_hits for f in counter.frames)
        values = counter.values
        shown = ", ".join(map(repr, values[:3])) + (", ..." if len(values) > 3 else "")
        evidence = {
            "frames": [f"{f.name} ({f.file}:{f.first_line})" for f in counter.frames],
            "compiles": compiles,
            "limit_hits": limit,
            "values": values[:10],
            "sources": sorted(counter.sources),
        }

        def finding(fix: str, safety: Safety, location: Location, notes: list[str], params=None) -> Finding:
            message = self.message.format(
                name=state.label if state else counter.name,
                frame=frame.name,
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
        if state is None or state.why_not:
            return finding(
                "it stays an int",
                Safety.NONE,
                fallback,
                [state.why_not if state else f"cannot find where `{counter.name}` is defined"],
            )
        uses = state.reads(frame, project)
        specialising = [u for u in uses if u.kind in _SPECIALISING]
        blocking = [u for u in uses if u.verdict != TENSOR]
        inexact = [u for u in uses if u.verdict == TENSOR and not u.int_exact]
        reasons = (
            [f"{w} at {where}" for w, where in state.bad_writes]
            + [f"`{state.label}` {u.describe()}" for u in distinct(blocking)]
            + [
                f"`{state.label}` {u.describe()} after `/` or float arithmetic, which int64 would round"
                for u in distinct(inexact)
            ]
        )
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
        config_file = state.config_file
        config_source = project.source(config_file)
        if (
            config_source is None
            or "dynamic_sources" in config_source.text
            or "allow_unspec_int_on_nn_module" in config_source.text
        ):
            notes.append(f"{config_file} already sets this config or cannot be read; no edit")
            return finding("it stays an int", Safety.NONE, fallback, notes)
        location = state.config_location
        params = {"config": statement, "at": config_source.import_insertion_offset()}
        return finding(f"make it dynamic with `{statement.split(' = ')[0]}`", Safety.SAFE, location, notes, params)

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


@dataclass
class _Counter:
    """One int that changes: a global of a file, or an attribute name, and where torch saw it."""

    kind: str  # "global" / "attribute"
    name: str
    frames: list[Frame] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)
    values: list = field(default_factory=list)
    first_use: Location | None = None

    def add(self, frame: Frame, source: str, value) -> None:
        if frame not in self.frames:
            self.frames.append(frame)
        self.sources.add(source)
        if value is not None and value not in self.values:
            self.values.append(value)
        if self.first_use is None:
            for reason in frame.reasons():
                if reason.source == source and reason.first_use is not None:
                    self.first_use = reason.first_use
                    break


class _State:
    """Where a counter is defined and written, and how each edit would look."""

    label = ""
    why_not: str | None = None
    bad_writes: list[tuple[str, str]]  # (what, file:line) writes that would replace a tensor
    buffer: tuple[dict, Location] | None = None  # (fix params, location) of the tensor edit
    buffer_why_not: str | None = None
    config_file = ""
    config_location: Location | None = None

    def reads(self, frame: Frame, project: Project) -> list[Use]:
        raise NotImplementedError


class _AttributeState(_State):
    @classmethod
    def find(cls, counter: _Counter, frame: Frame, files: list[str], project: Project) -> "_AttributeState":
        state = cls()
        state.counter, state.files, state.bad_writes = counter, files, []
        attr = counter.name
        owners = []
        for file in files:
            source = project.source(file)
            for node in source.nodes(cst.ClassDef):
                if _class_writes(node, attr) or _class_level(node, attr) is not None:
                    owners.append((file, source, node))
        owner = _preferred_owner(owners, counter, frame, project)
        if owner is None:
            names = ", ".join(sorted({n.name.value for _, _, n in owners})) or "none"
            state.why_not = (
                f"cannot tell which class in the profiled files holds `{attr}` (classes that assign it: {names})"
            )
            return state
        state.file, state.source, state.cls = owner
        state.label = f"{state.cls.name.value}.{attr}"
        pos = state.source.positions[state.cls]
        state.config_file = state.file
        state.config_location = Location(file=state.file, line=pos.start.line, col=pos.start.column)
        state._plan_buffer(project)
        return state

    def _plan_buffer(self, project: Project) -> None:
        attr, source, cls = self.counter.name, self.source, self.cls
        init = _function_named(cls, "__init__")
        class_level = _class_level(cls, attr)
        init_assigns = []
        for file in self.files:
            other = project.source(file)
            for node in other.nodes(cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Attribute) and target.target.attr.value == attr:
                        stmt = other.parents.get(node)
                        in_init = (
                            other is source
                            and init is not None
                            and stmt in init.body.body
                            and is_name(target.target.value, "self")
                            and len(node.targets) == 1
                        )
                        if in_init and not init_assigns:
                            init_assigns.append((node, stmt))
                        else:
                            self.bad_writes.append(
                                (f"`{_line(other, node)}` assigns a new value", _where(other, file, node))
                            )
            for node in other.nodes(cst.AugAssign):
                if isinstance(node.target, cst.Attribute) and node.target.attr.value == attr:
                    if not isinstance(node.operator, _IN_PLACE) or isinstance(node.value, (cst.Float, cst.Imaginary)):
                        self.bad_writes.append(
                            (f"`{_line(other, node)}` is not an in-place int update", _where(other, file, node))
                        )
        if not _is_module_class(cls, source):
            self.buffer_why_not = f"`{cls.name.value}` is not an nn.Module: no buffer to register"
            return
        super_call = _super_init(init) if init is not None else None
        if super_call is None:
            self.buffer_why_not = (
                f"`{cls.name.value}` has no `__init__` that calls `super().__init__()` to register a buffer in"
            )
            return
        if init_assigns:
            value = init_assigns[0][0].value
        elif class_level is not None:
            value = class_level.body[0].value
        else:
            self.buffer_why_not = f"no initial value of `{attr}` found in `{cls.name.value}`"
            return
        if isinstance(value, (cst.Float, cst.Imaginary, cst.SimpleString)):
            self.buffer_why_not = f"`{attr}` starts as `{source.code(value)}`, not an int"
            return
        statement = f'self.register_buffer("{attr}", {{tensor}}, persistent=False)'
        params: dict = {"value": source.code(value), "delete": []}
        if class_level is not None:
            params["delete"].append(list(_line_span(source, class_level, drop_blank_after=True)))
        location_node = super_call
        if init_assigns and source.positions[init_assigns[0][1]].start.line > source.positions[super_call].start.line:
            stmt = init_assigns[0][1]
            params["replace"] = list(source.span(stmt.body[0]))
            params["replace_with"] = statement
            location_node = stmt
        else:
            if init_assigns:
                params["delete"].append(list(_line_span(source, init_assigns[0][1])))
            end_line = source.positions[super_call].end.line
            params["insert"] = [source.line_offsets[end_line], source.statement_indent(super_call)]
            params["insert_statement"] = statement
        pos = source.positions[location_node]
        self.buffer = (params, Location(file=self.file, line=pos.start.line, col=pos.start.column, function="__init__"))

    def reads(self, frame: Frame, project: Project) -> list[Use]:
        attr, uses = self.counter.name, []
        analysis = ScalarUses(read=project.source)
        for file in self.files:
            source = project.source(file)
            for node in source.nodes(cst.Attribute):
                if node.attr.value != attr or not is_load(source, node):
                    continue
                inside = self.cls in set(source.ancestors(node))
                if inside and not is_name(node.value, "self"):
                    continue
                uses.extend(analysis.of_expression(node, _scope(analysis, source, file, node, frame)))
        return uses


class _GlobalState(_State):
    @classmethod
    def find(cls, counter: _Counter, project: Project) -> "_GlobalState":
        state = cls()
        state.counter, state.bad_writes = counter, []
        frame = counter.frames[0]
        state.file = frame.file
        state.source = project.source(frame.file)
        state.label = counter.name
        if state.source is None:
            state.why_not = f"cannot read {frame.file}, which defines `{counter.name}`"
            return state
        state.config_file = frame.file
        name, source = counter.name, state.source
        inits = []
        for statement in source.module.body:
            if (
                isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Assign)
                and len(statement.body[0].targets) == 1
                and is_name(statement.body[0].targets[0].target, name)
            ):
                inits.append(statement.body[0])
        if not inits:
            state.why_not = f"no module-level `{name} = ...` in {frame.file}"
            return state
        init = inits[0]
        pos = source.positions[init]
        state.config_location = Location(file=frame.file, line=pos.start.line, col=pos.start.column)
        for node in source.nodes(cst.Assign):
            if node is init:
                continue
            for target in node.targets:
                if is_name(target.target, name) and _binds_global(source, node, name):
                    state.bad_writes.append(
                        (f"`{_line(source, node)}` assigns a new value", _where(source, frame.file, node))
                    )
        for node in source.nodes(cst.AugAssign):
            if is_name(node.target, name) and _binds_global(source, node, name):
                if not isinstance(node.operator, _IN_PLACE) or isinstance(node.value, (cst.Float, cst.Imaginary)):
                    state.bad_writes.append(
                        (f"`{_line(source, node)}` is not an in-place int update", _where(source, frame.file, node))
                    )
        if isinstance(init.value, (cst.Float, cst.Imaginary, cst.SimpleString)):
            state.buffer_why_not = f"`{name}` starts as `{source.code(init.value)}`, not an int"
            return state
        params = {
            "value": source.code(init.value),
            "replace": list(source.span(init.value)),
            "replace_with": "{tensor}",
        }
        state.buffer = (params, state.config_location)
        return state

    def reads(self, frame: Frame, project: Project) -> list[Use]:
        name, source, uses = self.counter.name, self.source, []
        analysis = ScalarUses(read=project.source)
        for node in source.nodes(cst.Name):
            if node.value == name and is_load(source, node) and _binds_global(source, node, name):
                uses.extend(analysis.of_expression(node, _scope(analysis, source, self.file, node, frame)))
        return uses


# -- helpers ------------------------------------------------------------------------------------
def _config(counter: _Counter, state: _State, profile: Profile):
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
    if counter.kind == "attribute":
        return (
            "torch._dynamo.config.allow_unspec_int_on_nn_module = True",
            f"torch {profile.torch_version} has no `dynamic_sources` (2.7+): "
            "`allow_unspec_int_on_nn_module` makes every nn.Module int attribute dynamic after one "
            "recompile, and does nothing under dynamic=False",
        )
    return f"torch {profile.torch_version} has no config that makes one global int dynamic (`dynamic_sources` is 2.7+)"


def _merge_configs(findings: list[Finding]) -> Finding:
    """One config statement per file: several counters share one `dynamic_sources` string."""
    if len(findings) == 1:
        return findings[0]
    first = findings[0]
    names = []
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


def _scope(analysis: ScalarUses, source: SourceFile, file: str, node: cst.CSTNode, frame: Frame):
    func = next((a for a in source.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
    if func is None:
        return analysis.scope(source, file, source.module)
    seeds = set()
    if file == frame.file and source.function_def(frame.first_line, frame.name) is func:
        seeds = {n for c in frame.compiles for n, e in c.inputs.items() if e.get("type") == "Tensor"}
    elif func.name.value == "forward" and source.enclosing_class(func) is not None:
        # An nn.Module's forward: its required arguments are the tensors it is called with.
        params = func.params
        seeds = {p.name.value for p in (*params.posonly_params, *params.params)[1:] if p.default is None}
    return analysis.scope(source, file, func, seeds)


def _preferred_owner(owners, counter: _Counter, frame: Frame, project: Project):
    if len(owners) == 1:
        return owners[0]
    source = project.source(frame.file)
    func = source.function_def(frame.first_line, frame.name) if source else None
    enclosing = source.enclosing_class(func) if func is not None else None
    for owner in owners:
        if owner[2] is enclosing and any(s.startswith("self.") for s in counter.sources):
            return owner
    for s in counter.sources:  # ``G['criterion'].n``: the class of the global it hangs off
        match = re.match(r"""^G\[['"](\w+)['"]\]\.\w+$""", s)
        if match and source is not None:
            for node in source.nodes(cst.Assign):
                if any(is_name(t.target, match.group(1)) for t in node.targets) and isinstance(node.value, cst.Call):
                    class_name = source.code(node.value.func).rsplit(".", 1)[-1]
                    found = [o for o in owners if o[2].name.value == class_name]
                    if len(found) == 1:
                        return found[0]
    return None


def _class_writes(cls: cst.ClassDef, attr: str) -> bool:
    for node in walk(cls):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, cst.AugAssign):
            targets = [node.target]
        if any(isinstance(t, cst.Attribute) and is_name(t.value, "self") and t.attr.value == attr for t in targets):
            return True
    return False


def _class_level(cls: cst.ClassDef, attr: str) -> cst.SimpleStatementLine | None:
    for statement in cls.body.body:
        if (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign)
            and len(statement.body[0].targets) == 1
            and is_name(statement.body[0].targets[0].target, attr)
        ):
            return statement
    return None


def _function_named(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _super_init(init: cst.FunctionDef) -> cst.SimpleStatementLine | None:
    for statement in init.body.body:
        if (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, cst.Call)
        ):
            func = statement.body[0].value.func
            if isinstance(func, cst.Attribute) and func.attr.value == "__init__":
                return statement
    return None


def _is_module_class(cls: cst.ClassDef, source: SourceFile, depth: int = 0) -> bool:
    for base in cls.bases:
        qualified = source.qualified_name(base.value)
        if qualified in ("torch.nn.Module", "nn.Module", "Module", "torch.nn.modules.module.Module"):
            return True
        local = next(
            (n for n in source.module.body if isinstance(n, cst.ClassDef) and n.name.value == source.code(base.value)),
            None,
        )
        if local is not None and depth < 5 and _is_module_class(local, source, depth + 1):
            return True
        if qualified.startswith("torch.nn."):
            return True  # nn.Linear, nn.Sequential, ...
    return False


def _binds_global(source: SourceFile, node: cst.CSTNode, name: str) -> bool:
    """Is ``name`` at this node the module global (not a local of the function around it)?"""
    func = next((a for a in source.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
    if func is None:
        return True
    if isinstance(func, cst.Lambda):
        return name not in {p.name.value for p in func.params.params}
    for inner in walk(func.body):
        if isinstance(inner, cst.Global) and any(n.name.value == name for n in inner.names):
            return True
    params = func.params
    if name in {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}:
        return False
    for inner in walk(func.body):
        targets = []
        if isinstance(inner, cst.Assign):
            targets = [t.target for t in inner.targets]
        elif isinstance(inner, (cst.AugAssign, cst.AnnAssign, cst.For)):
            targets = [inner.target]
        if any(is_name(t, name) for t in targets):
            return False
    return True


def _line_span(source: SourceFile, statement: cst.CSTNode, drop_blank_after: bool = False) -> tuple[int, int]:
    """The whole lines of a statement; with ``drop_blank_after``, the blank line after it too
    when it would leave two blank lines (or a blank right after the class header)."""
    pos = source.positions[statement]
    start = source.offset(pos.start.line, 0)
    end_line = pos.end.line
    lines = source.lines
    if drop_blank_after and end_line < len(lines) and not lines[end_line].strip():
        before = lines[pos.start.line - 2] if pos.start.line >= 2 else ""
        if not before.strip() or before.rstrip().endswith(":"):
            end_line += 1
    return start, source.line_offsets[end_line] if end_line < len(source.line_offsets) else len(source.text)


def _line(source: SourceFile, node: cst.CSTNode) -> str:
    return source.lines[source.positions[node].start.line - 1].strip()


def _where(source: SourceFile, file: str, node: cst.CSTNode) -> str:
    return f"{file}:{source.positions[node].start.line}"


RULE = CounterBuffer()
