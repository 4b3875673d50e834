"""Ints that change between calls (RF006's counters): a module global or an nn.Module attribute
that torch specialised on, where it is defined and written, whether every write is in place and
every read exact int arithmetic with tensors, and how a 0-d tensor or a ``dynamic_sources``
entry would replace it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.cst_names import is_load
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import ScalarUses, Use
from recompile_fix.analysis.source import SourceFile, is_name, walk
from recompile_fix.profile.model import Frame, Location

__all__ = ["AttributeState", "Counter", "CounterState", "GlobalState"]

_IN_PLACE = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.FloorDivideAssign, cst.ModuloAssign)


@dataclass
class Counter:
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


class CounterState:
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


class AttributeState(CounterState):
    @classmethod
    def find(cls, counter: Counter, frame: Frame, files: list[str], project: Project) -> "AttributeState":
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
        is_module, why = ClassIndex(project).is_module(ClassRef(self.file, source, cls))
        if is_module is not True:
            self.buffer_why_not = (
                f"{why}: no buffer to register"
                if is_module is False
                else f"cannot tell whether `{cls.name.value}` is an nn.Module ({why}): no buffer registered"
            )
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
        analysis = ScalarUses(read=project.source, classes=ClassIndex(project))
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


class GlobalState(CounterState):
    @classmethod
    def find(cls, counter: Counter, project: Project) -> "GlobalState":
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
        analysis = ScalarUses(read=project.source, classes=ClassIndex(project))
        for node in source.nodes(cst.Name):
            if node.value == name and is_load(source, node) and _binds_global(source, node, name):
                uses.extend(analysis.of_expression(node, _scope(analysis, source, self.file, node, frame)))
        return uses


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


def _preferred_owner(owners, counter: Counter, frame: Frame, project: Project):
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
