"""Numbers that change between calls: a module global or an nn.Module attribute that torch
specialised on (RF006's int counters, RF014's float attributes), where it is defined, written and
read; for an int, whether every write is in place and every read exact int arithmetic with
tensors, and how a 0-d tensor or a ``dynamic_sources`` entry would replace it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.analysis.classes import ClassIndex, ClassRef, qualified_classes
from recompile_fix.analysis.cst_names import is_load, target_names
from recompile_fix.analysis.cst_walk import is_name, walk
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import ScalarUses, Use
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.unprofiled_imports import read_in_unprofiled_imports
from recompile_fix.profile.model import Frame, Location, is_library_path

__all__ = [
    "ATTRIBUTE_SOURCE",
    "AttributeState",
    "Counter",
    "CounterState",
    "GlobalState",
    "bound_class",
    "holder_class",
    "submodule_class",
    "constructed_class",
    "counter_owner",
    "global_writes",
    "in_a_function",
]

# ``self.n``, ``G['criterion'].n``, ``model.blocks.n``, ``args[0].model.n`` (a library wrapper's): a root, then attributes.
ATTRIBUTE_SOURCE = re.compile(r"""^(?P<root>G\[['"]\w+['"]\]|\w+(?:\[\d+\])?)(?P<rest>(?:\.\w+)*)\.(?P<attr>\w+)$""")


# libcst node classes by name: reading cst.* here would load libcst when the module is imported.
_IN_PLACE = frozenset({"AddAssign", "SubtractAssign", "MultiplyAssign", "FloorDivideAssign", "ModuloAssign"})


@dataclass
class Counter:
    """One int that changes: a global of a file, or an attribute name, and where torch saw it."""

    kind: str  # "global" / "attribute"
    name: str
    # The class of the object holding an attribute counter, by identity: (file, ``__qualname__``)
    # and how it is known ("recorded": the recorder saw its type; "constructed": the global it
    # hangs off is built by a call of it; "enclosing": the compiled method's class, a type
    # ``self`` may be a subclass of). None: not known (an older Profile): found by name, then only
    # when one class of the project assigns it.
    owner: tuple[str, str, str] | None = None
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
                # torch names the innermost line that read it, maybe a library's (ModuleList's
                # __getitem__): a finding placed there would be outside the project, never shown.
                if (
                    reason.source == source
                    and reason.first_use is not None
                    and not is_library_path(reason.first_use.file)
                ):
                    self.first_use = reason.first_use
                    break


class CounterState:
    """Where a counter is defined and written, and how each edit would look."""

    counter: Counter
    file: str  # the file the edits go in
    label = ""
    why_not: str | None = None
    why_not_location: Location | None = None  # where the finding that says why_not goes
    bad_writes: list[tuple[str, str]]  # (what, file:line) writes that would replace a tensor
    buffer: tuple[dict, Location] | None = None  # (fix params, location) of the tensor edit
    buffer_why_not: str | None = None
    fields_taken: list[str] = []  # the output fields the last ``reads`` took for tensors
    config_file = ""
    config_location: Location | None = None

    def reads(self, frame: Frame, project: Project) -> list[Use]:
        raise NotImplementedError


class AttributeState(CounterState):
    # The classes whose methods see the counter's object as ``self`` (the project part of its
    # type's MRO), when its exact type is known; None: any class's ``self.<attr>`` may be it.
    lineage: set[ClassRef] | None = None
    files: list[str]  # the profiled files, where the counter is read and written
    source: SourceFile  # the file of the class that assigns it, and the class
    cls: cst.ClassDef

    @classmethod
    def find(cls, counter: Counter, frame: Frame, files: list[str], project: Project) -> "AttributeState":
        state = cls()
        state.counter, state.files, state.bad_writes = counter, files, []
        attr = counter.name
        classes = ClassIndex(project)
        owner = None
        if counter.owner is not None:
            file, qualname, known = counter.owner
            typed = classes.by_qualname(file, qualname)
            if typed is None:
                state.why_not = f"cannot find `class {qualname}` in {file}, the class of the object that holds `{attr}`"
                state.why_not_location = Location(file=file, line=1)
                return state
            lineage = list(classes.mro(typed))
            owner = next((c for c in lineage if _assigns(c.node, attr)), None)
            if known != "enclosing":  # its exact type: no other class's `self` is this object
                state.lineage = set(lineage)
            if owner is None and known != "enclosing":
                state.why_not = f"no class in `{qualname}` ({file}) or its bases in the project assigns `{attr}`"
                state.why_not_location = _class_location(typed)
                return state
        if owner is None:
            # Not known which class (an older Profile): by name, and only when one class in the
            # profiled files assigns it, as they are now (a file already fixed still counts: its
            # class must not leave another file's the only one).
            owners = []
            profiled = [
                p for p in (project.expected_hashes or files) if not os.path.isabs(p) and p.endswith((".py", ".ipynb"))
            ]
            for file in profiled:
                source = classes.read(file)
                if source is None:
                    continue
                for node in source.nodes(cst.ClassDef):
                    if _assigns(node, attr):
                        owners.append(ClassRef(file, source, node))
            owner = _preferred_owner(owners, counter, frame, project)
            if owner is None:
                names = ", ".join(sorted({o.name for o in owners})) or "none"
                state.why_not = (
                    f"cannot tell which class in the profiled files holds `{attr}` (classes that assign it: {names})"
                )
                return state
        if project.source(owner.file) is not owner.source:
            what = "changed since it was profiled" if owner.file in project.stale else "was not profiled"
            state.why_not = f"{owner.file} {what}: `{owner.name}.{attr}` is not edited there"
            state.why_not_location = _class_location(owner)
            return state
        state.file, state.source, state.cls = owner.file, owner.source, owner.node
        state.label = f"{state.cls.name.value}.{attr}"
        pos = state.source.positions[state.cls]
        state.config_file = state.file
        state.config_location = Location(file=state.file, line=pos.start.line, col=pos.start.column)
        state._plan_buffer(project)
        return state

    def _plan_buffer(self, project: Project) -> None:
        attr, source, cls = self.counter.name, self.source, self.cls
        elsewhere = read_in_unprofiled_imports(attr, self.files, project)
        if elsewhere is not None:
            self.buffer_why_not = (
                f"{elsewhere} reads `.{attr}` in a file no compile ran through, whose uses the run did not "
                "see (a buffer would be a tensor there: `str()` of it prints `tensor(...)`)"
            )
            return
        init = _function_named(cls, "__init__")
        class_level = _class_level(cls, attr)
        init_assigns = self._writes(project, init)
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
            value = cst.ensure_type(class_level.body[0], cst.Assign).value  # as `_class_level` found it
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

    def _writes(
        self, project: Project, init: cst.FunctionDef | None
    ) -> list[tuple[cst.Assign, cst.SimpleStatementLine]]:
        """Every write of the attribute in the profiled files: the first ``self.<attr> = ...`` in
        the class's ``__init__`` (the initial value, with its statement), returned; any other
        write that would replace a tensor, added to ``bad_writes``."""
        attr, source = self.counter.name, self.source
        init_assigns: list[tuple[cst.Assign, cst.SimpleStatementLine]] = []
        for file in self.files:
            other = project.source(file)
            assert other is not None, f"{file} is profiled and readable"
            for node in other.nodes(cst.Assign):
                for target in node.targets:
                    if (
                        isinstance(target.target, cst.Attribute)
                        and target.target.attr.value == attr
                        and not self._another_class(other, file, target.target)
                    ):
                        stmt = other.parents.get(node)
                        in_init = (
                            other is source
                            and isinstance(stmt, cst.SimpleStatementLine)  # an Assign's statement always is
                            and init is not None
                            and stmt in init.body.body
                            and is_name(target.target.value, "self")
                            and len(node.targets) == 1
                        )
                        if in_init and not init_assigns and isinstance(stmt, cst.SimpleStatementLine):
                            init_assigns.append((node, stmt))
                        else:
                            self.bad_writes.append(
                                (f"`{_line(other, node)}` assigns a new value", _where(other, file, node))
                            )
            for node in other.nodes(cst.AugAssign):
                if (
                    isinstance(node.target, cst.Attribute)
                    and node.target.attr.value == attr
                    and not self._another_class(other, file, node.target)
                ):
                    if type(node.operator).__name__ not in _IN_PLACE or isinstance(
                        node.value, (cst.Float, cst.Imaginary)
                    ):
                        self.bad_writes.append(
                            (f"`{_line(other, node)}` is not an in-place int update", _where(other, file, node))
                        )
        return init_assigns

    def reads(self, frame: Frame, project: Project, output_fields: bool = False) -> list[Use]:
        """Every read's uses; ``output_fields``: a field of a module's output is taken for a
        tensor (``fields_taken`` lists those guesses)."""
        attr, uses = self.counter.name, []
        classes = ClassIndex(project)
        analysis = ScalarUses(read=project.source, classes=classes, output_fields=output_fields)
        self.fields_taken = analysis.fields_taken
        for file in self.files:
            source = project.source(file)
            assert source is not None, f"{file} is profiled and readable"
            for node in source.nodes(cst.Attribute):
                if node.attr.value != attr or not is_load(source, node):
                    continue
                if isinstance(call := source.parents.get(node), cst.Call) and call.func is node:
                    continue  # `opt.step()`: a method called, never a read of an int counter
                if self.cls in set(source.ancestors(node)) and not is_name(node.value, "self"):
                    continue
                if self._another_class(source, file, node) or self._another_object(classes, source, file, node):
                    continue
                uses.extend(analysis.of_expression(node, _scope(analysis, source, file, node, frame)))
        return uses

    def _another_object(self, classes: ClassIndex, source: SourceFile, file: str, node: cst.Attribute) -> bool:
        """``settings.margin`` where ``settings = Settings()`` in the file: an instance of a
        project class that is not the counter's."""
        if is_name(node.value, "self"):
            return False
        built = holder_class(classes, source, file, node.value)
        return built is not None and not any(c.node is self.cls for c in classes.mro(built))

    def _another_class(self, source: SourceFile, file: str, node: cst.Attribute) -> bool:
        """``self.<attr>`` in a method of a class the counter's object is not an instance of
        (another file's ``class Net``): another object's attribute, when the type is known."""
        if self.lineage is None or not is_name(node.value, "self"):
            return False
        for ancestor in source.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                cls = source.enclosing_class(ancestor)
                if cls is not None:
                    return ClassRef(file, source, cls) not in self.lineage
        return False


class GlobalState(CounterState):
    source: SourceFile | None  # the file that defines the global (None: unreadable, why_not says so)

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
        for node, what in _other_bindings(source, name):
            if _binds_global(source, node, name):  # `for N in (1, 2, 3):` rebinds it to each int
                state.bad_writes.append((f"`{_line(source, node)}` {what}", _where(source, frame.file, node)))
        for node in source.nodes(cst.AugAssign):
            if is_name(node.target, name) and _binds_global(source, node, name):
                if type(node.operator).__name__ not in _IN_PLACE or isinstance(node.value, (cst.Float, cst.Imaginary)):
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
        assert source is not None, "read only where find() found the file"
        analysis = ScalarUses(read=project.source, classes=ClassIndex(project))
        for node in source.nodes(cst.Name):
            if node.value == name and is_load(source, node) and _binds_global(source, node, name):
                uses.extend(analysis.of_expression(node, _scope(analysis, source, self.file, node, frame)))
        return uses


def global_writes(source: SourceFile, file: str, name: str) -> tuple[list[cst.Assign], list[tuple[str, str]]]:
    """The plain assignments ``name = ...`` of the module global ``name`` in ``source`` (at module
    level, or in a function that declares it ``global``), and the statements that bind or update
    it otherwise, as (what, file:line): ``+=``, a loop target, ``with ... as``, ``:=``, ``del``."""
    assigns = [
        node
        for node in source.nodes(cst.Assign)
        if any(is_name(t.target, name) for t in node.targets) and _binds_global(source, node, name)
    ]
    others = [
        (f"`{_line(source, node)}` updates it in place", _where(source, file, node))
        for node in source.nodes(cst.AugAssign)
        if is_name(node.target, name) and _binds_global(source, node, name)
    ]
    others.extend(
        (f"`{_line(source, node)}` unpacks a value into it", _where(source, file, node))
        for node in source.nodes(cst.Assign)
        if any(not is_name(t.target, name) and name in target_names(t.target) for t in node.targets)
        and _binds_global(source, node, name)
    )
    for node, what in _other_bindings(source, name):
        if _binds_global(source, node, name):
            others.append((f"`{_line(source, node)}` {what}", _where(source, file, node)))
    return assigns, others


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


def counter_owner(frame: Frame, root: str, project: Project) -> tuple[str, str, str] | None:
    """The class of the object ``root`` names in compiled ``frame`` (``self``, ``self.loss``,
    ``G['criterion']``), by identity: (file, ``__qualname__``, how it is known); see
    ``Counter.owner``. None: not known."""
    recorded = frame.module_class(root)
    if recorded is not None:
        return (*recorded, "recorded")
    classes = ClassIndex(project)
    if "." in root:  # ``self.loss``: the class its holder's ``__init__`` builds it from
        parent_root, attr = root.rsplit(".", 1)
        parent = counter_owner(frame, parent_root, project)
        holder = classes.by_qualname(parent[0], parent[1]) if parent is not None else None
        built = submodule_class(classes, holder, attr) if holder is not None else None
        qualname = _qualname(built) if built is not None else None
        if parent is None or built is None or qualname is None:
            return None
        return (built.file, qualname, "enclosing" if parent[2] == "enclosing" else "constructed")
    source = project.source(frame.file)
    if source is None:
        return None
    match = re.fullmatch(r"""G\[['"](\w+)['"]\]""", root)
    if match:  # ``criterion = Loss()`` (or ``models.Loss().to(device)``) at the top of the file
        constructed: set[ClassRef | None] = set()
        for statement in source.module.body:
            for node in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(node, cst.Assign) and any(is_name(t.target, match.group(1)) for t in node.targets):
                    constructed.add(constructed_class(classes, frame.file, node.value))
        if len(constructed) == 1 and None not in constructed:
            ref = constructed.pop()
            assert ref is not None
            qualname = _qualname(ref)
            return (ref.file, qualname, "constructed") if qualname is not None else None
        return None
    func = source.function_def(frame.first_line, frame.name)
    first = _first_parameter(func) if func is not None else None
    cls = source.enclosing_class(func) if func is not None else None
    if cls is not None and root == first:
        qualname = _qualname(ClassRef(frame.file, source, cls))
        return (frame.file, qualname, "enclosing") if qualname is not None else None
    return None


def bound_class(
    classes: ClassIndex, source: SourceFile, file: str, name: str, compiled: bool = False
) -> ClassRef | None:
    """The one project class ``name`` is built from in ``file`` (``G = Generator()``,
    ``G, D = Generator(), Discriminator()``); with ``compiled``, the class of the module
    ``torch.compile`` wraps (``actor = torch.compile(EpsGreedy(q))``). None when not exactly one."""
    found: set[ClassRef | None] = set()
    for node in source.nodes(cst.Assign):
        for target in node.targets:
            if is_name(target.target, name) and compiled:
                found.add(constructed_class(classes, file, _compiled_module(node.value)))
            elif is_name(target.target, name):
                found.add(constructed_class(classes, file, node.value))
            elif isinstance(target.target, cst.Tuple) and isinstance(node.value, cst.Tuple):
                for element, value in zip(target.target.elements, node.value.elements):
                    if is_name(element.value, name):
                        found.add(constructed_class(classes, file, value.value))
    return found.pop() if len(found) == 1 and None not in found else None


def _compiled_module(value: cst.BaseExpression) -> cst.BaseExpression:
    """The module ``torch.compile(module, ...)`` is given (an expression no class builds else)."""
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and is_name(value.func.value, "torch")
        and value.func.attr.value == "compile"
        and value.args
        and value.args[0].keyword is None
    ):
        return value.args[0].value
    return cst.Name("None")


def holder_class(classes: ClassIndex, source: SourceFile, file: str, holder: cst.BaseExpression) -> ClassRef | None:
    """The project class of ``G`` (``G = Generator()``) or ``model.criterion`` (the class
    ``model``'s class builds its ``criterion`` from); None: not known."""
    if isinstance(holder, cst.Name):
        return bound_class(classes, source, file, holder.value)
    if isinstance(holder, cst.Attribute) and holder.attr.value == "_orig_mod" and isinstance(holder.value, cst.Name):
        # `actor = torch.compile(EpsGreedy(q))`: the wrapper's `_orig_mod` is the module it compiled.
        return bound_class(classes, source, file, holder.value.value, compiled=True)
    if isinstance(holder, cst.Attribute):
        parent = holder_class(classes, source, file, holder.value)
        return submodule_class(classes, parent, holder.attr.value) if parent is not None else None
    return None


def constructed_class(classes: ClassIndex, file: str, value: cst.BaseExpression) -> ClassRef | None:
    """The project class whose call builds ``value`` (``Net()``, ``m.Net(4).to(device)``)."""
    while isinstance(value, cst.Call):
        found = classes.resolve(file, value.func)
        if found is not None:
            return found
        if not isinstance(value.func, cst.Attribute):
            return None
        value = value.func.value
    return None


def submodule_class(classes: ClassIndex, holder: ClassRef, attr: str) -> ClassRef | None:
    """The project class every ``self.<attr> = Cls(...)`` of ``holder`` (or its bases) builds;
    None when there is none, or they build different classes."""
    built = set()
    for owner in classes.mro(holder):
        for node in walk(owner.node):
            if isinstance(node, cst.Assign) and any(
                isinstance(t.target, cst.Attribute) and is_name(t.target.value, "self") and t.target.attr.value == attr
                for t in node.targets
            ):
                built.add(constructed_class(classes, owner.file, node.value))
    return built.pop() if len(built) == 1 else None


def _qualname(ref: ClassRef) -> str | None:
    return next((q for q, nodes in qualified_classes(ref.source.module).items() if ref.node in nodes), None)


def _first_parameter(func: cst.FunctionDef) -> str | None:
    params = (*func.params.posonly_params, *func.params.params)
    return params[0].name.value if params else None


def _assigns(cls: cst.ClassDef, attr: str) -> bool:
    return _class_writes(cls, attr) or _class_level(cls, attr) is not None


def _class_location(ref: ClassRef) -> Location:
    pos = ref.source.positions[ref.node]
    return Location(file=ref.file, line=pos.start.line, col=pos.start.column)


def _preferred_owner(owners: list[ClassRef], counter: Counter, frame: Frame, project: Project) -> ClassRef | None:
    if len(owners) == 1:
        return owners[0]
    source = project.source(frame.file)
    func = source.function_def(frame.first_line, frame.name) if source else None
    enclosing = source.enclosing_class(func) if source is not None and func is not None else None
    for owner in owners:
        if owner.node is enclosing and any(s.startswith("self.") for s in counter.sources):
            return owner
    return None


def _class_writes(cls: cst.ClassDef, attr: str) -> bool:
    for node in walk(cls):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):  # `self.margin: float = 0.1`
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


def _other_bindings(source: SourceFile, name: str) -> list[tuple[cst.CSTNode, str]]:
    """Statements other than ``name = ...`` and ``name += ...`` that bind ``name`` anew: a loop
    target, ``with ... as name``, ``(name := ...)``, an annotated assignment, ``del name``."""
    found: list[tuple[cst.CSTNode, str]] = []
    for loop in source.nodes(cst.For):
        if name in target_names(loop.target):
            found.append((loop, "binds it as a loop variable"))
    for item in source.nodes(cst.WithItem):
        if item.asname is not None and name in target_names(item.asname.name):
            found.append((item, "binds it with `as`"))
    for walrus in source.nodes(cst.NamedExpr):
        if is_name(walrus.target, name):
            found.append((walrus, "assigns a new value (`:=`)"))
    for annotated in source.nodes(cst.AnnAssign):
        if is_name(annotated.target, name) and annotated.value is not None:
            found.append((annotated, "assigns a new value"))
    for deleted in source.nodes(cst.Del):
        if name in target_names(deleted.target):
            found.append((deleted, "deletes it"))
    return found


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


def in_a_function(project: Project, use: Use) -> bool:
    """Is the use inside some function (code a compiled frame may trace), not at module level?"""
    source = project.source(use.file) or project.read_only(use.file)
    if source is None:
        return True  # cannot tell: as if traced
    for func in source.nodes(cst.FunctionDef):
        position = source.positions[func]
        if position.start.line <= use.line <= position.end.line:
            return True
    return False
