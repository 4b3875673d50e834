"""Stacks of identical blocks in a module's source: the analysis behind RF004 (nested_compile_region).

It reads the file's ``ast`` tree only: static scans run it on every file with a ``ModuleList``,
and libcst's parse and positions cost about ten times as much. ``Analysis(source).sites()``
finds the containers of blocks a class runs in sequence; ``check(site)`` asks ``region_check``
whether the block's ``forward`` can be traced whole.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from recompile_fix.analysis.ast_tree import (
    DEFS,
    FORS,
    Tree,
    arguments,
    code_of,
    dotted,
    eager_compile,
    identifiers,
    is_int,
    parameter_receiving,
    self_attr,
    simple_string,
    unstarred,
)
from recompile_fix.analysis.region_check import RegionWalker, Verdict
from recompile_fix.analysis.source import SourceFile

__all__ = ["already_marked", "Analysis", "Site", "training_in"]


@dataclass
class Site:
    """A container of identical blocks that a module runs in sequence."""

    owner: str  # the class whose __init__ builds the container
    attr: str  # self.<attr>
    block: str  # the blocks' class
    count: int | None  # how many, when the source says
    line: int  # the loop (or the Sequential call) that runs them
    function: str | None = None  # a per-layer function of the file the blocks are passed to
    module_param: str | None = None  # the parameter of that function that receives the block

    @property
    def target_key(self) -> str:
        return self.function or self.block


_BATCHNORMS = {
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "SyncBatchNorm",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
}


_INSTANCENORMS = {"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"}


class Analysis:
    """What one file says about its modules: containers of blocks, submodules, and whether a
    block's forward can be traced whole."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.tree = Tree(source.syntax)
        body = source.syntax.body
        self.classes = {s.name: s for s in body if isinstance(s, ast.ClassDef)}
        self.functions = {s.name: s for s in body if isinstance(s, DEFS)}
        self.constants: dict[str, int] = {}
        self.torch_names: set[str] = set()  # names bound to torch or something imported from it
        self.imports: dict[str, str] = {}  # other imported names -> module
        self.globals: set[str] = set()  # other module-level names (not classes or functions)
        self.loggers: set[str] = set()
        for statement in body:
            self._read_top_level(statement)
        self._members: dict[str, dict] = {}
        self._methods: dict[str, dict[str, ast.FunctionDef]] = {}

    def _read_top_level(self, statement: ast.stmt) -> None:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                self._imported(alias.asname or alias.name.split(".")[0], alias.name)
        elif isinstance(statement, ast.ImportFrom) and statement.names[0].name != "*":
            module = statement.module or ""
            for alias in statement.names:
                self._imported(alias.asname or alias.name, f"{module}.{alias.name}")
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if not isinstance(target, ast.Name):
                    continue
                self.globals.add(target.id)
                if is_int(statement.value):
                    self.constants[target.id] = statement.value.value
                if isinstance(statement.value, ast.Call) and dotted(statement.value.func).endswith("getLogger"):
                    self.loggers.add(target.id)

    def _imported(self, bound: str, what: str) -> None:
        if what.split(".")[0] == "torch":
            self.torch_names.add(bound)
        else:
            self.imports[bound] = what

    def function_def(self, first_line: int, name: str) -> ast.FunctionDef | None:
        """The def a code object came from (``co_firstlineno`` counts decorators)."""
        for node in self.tree.order:
            if (
                isinstance(node, DEFS)
                and node.name == name
                and first_line in (node.lineno, *(d.lineno for d in node.decorator_list))
            ):
                return node
        return None

    # -- classes ----------------------------------------------------------------------
    def methods(self, class_name: str) -> dict[str, ast.FunctionDef]:
        found = self._methods.get(class_name)
        if found is None:
            cls_ = self.classes.get(class_name)
            found = {} if cls_ is None else {s.name: s for s in cls_.body if isinstance(s, DEFS)}
            self._methods[class_name] = found
        return found

    def members(self, class_name: str) -> dict:
        """``self.x = ...`` in ``__init__``: submodules (kind, detail), parameters and buffers."""
        if class_name in self._members:
            return self._members[class_name]
        info = {"modules": {}, "tensors": set(), "buffers": set(), "containers": {}}
        self._members[class_name] = info
        init = self.methods(class_name).get("__init__")
        if init is None:
            return info
        for node in self.tree.walk(init, skip_defs=True):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    attr = self_attr(target)
                    if attr is not None:
                        self._member(info, attr, node.value)
            elif isinstance(node, ast.Call):
                name = dotted(node.func)
                if (
                    name == "self.register_buffer"
                    and (args := arguments(node))
                    and simple_string(self.source, args[0][1])
                ):
                    info["buffers"].add(args[0][1].value)
                    info["tensors"].add(args[0][1].value)
                elif (
                    name.startswith("self.")
                    and name.endswith(".append")
                    and name.count(".") == 2
                    and (args := arguments(node))
                ):
                    attr = name.split(".")[1]
                    block = self._block_of(args[0][1])
                    if attr in info["containers"] and block is not None:
                        info["containers"][attr][1].add(block)
                        info["containers"][attr][2] = _loop_count(self, node, init)
        return info

    def _member(self, info: dict, attr: str, value: ast.expr) -> None:
        if not isinstance(value, ast.Call):
            info["modules"][attr] = ("unknown", code_of(self.source, value))
            return
        name = dotted(value.func)
        last = name.rsplit(".", 1)[-1]
        root = name.split(".")[0]
        if (
            last in ("Parameter", "tensor", "zeros", "ones", "randn", "empty", "full", "arange")
            and root in self.torch_names
        ):
            info["tensors"].add(attr)
        elif last in ("ModuleList", "Sequential") and root in self.torch_names:
            blocks, count = self._elements(value)
            info["containers"][attr] = [last, blocks, count]
            info["modules"][attr] = ("container", blocks)
        elif root in self.torch_names:
            tracks = last in _BATCHNORMS or (
                last in _INSTANCENORMS
                and any(
                    k.arg == "track_running_stats" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in value.keywords
                )
            )
            info["modules"][attr] = ("torch", (last, tracks))
        elif name in self.classes:
            info["modules"][attr] = ("class", name)
        else:
            info["modules"][attr] = ("unknown", code_of(self.source, value.func))

    def _block_of(self, expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Call):
            name = dotted(expr.func)
            return name or None
        return None

    def _elements(self, call: ast.Call) -> tuple[set[str], int | None]:
        """The classes a ModuleList / Sequential is built from, and how many, when the source says."""
        blocks: set[str] = set()
        count: int | None = 0
        for keyword, value, _ in arguments(call):
            if keyword is not None:
                continue
            if isinstance(value, (ast.GeneratorExp, ast.ListComp)):
                block = self._block_of(value.elt)
                blocks.add(block or "?")
                n = _range_count(self, value.generators)
                count = None if (count is None or n is None) else count + n
            elif isinstance(value, (ast.List, ast.Tuple)):
                for element in value.elts:
                    blocks.add(self._block_of(unstarred(element)) or "?")
                count = None if count is None else count + len(value.elts)
            else:
                blocks.add(self._block_of(value) or "?")
                count = None if count is None else count + 1
        return blocks, count

    # -- sites ------------------------------------------------------------------------
    def sites(self) -> list[Site]:
        found = []
        for class_name in self.classes:
            found.extend(self._class_sites(class_name))
        return found

    def _class_sites(self, class_name: str) -> list[Site]:
        containers = self.members(class_name)["containers"]
        found = []
        for method in self.methods(class_name).values():
            if method.name == "__init__":
                continue
            for node in self.tree.walk(method):
                site = None
                if isinstance(node, FORS):
                    site = self._loop_site(class_name, containers, node)
                elif isinstance(node, ast.Call):
                    attr = self_attr(node.func)
                    if attr in containers and containers[attr][0] == "Sequential":
                        site = self._site(class_name, attr, containers[attr], node, None)
                if site is not None:
                    found.append(site)
        return found

    def _loop_site(self, class_name: str, containers: dict, loop: ast.For) -> Site | None:
        iterable, target = loop.iter, loop.target
        if isinstance(iterable, ast.Call) and dotted(iterable.func) == "enumerate" and (args := arguments(iterable)):
            iterable = args[0][1]
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = unstarred(target.elts[1])
        if isinstance(iterable, ast.Subscript):
            iterable = iterable.value
        attr = self_attr(iterable)
        if attr not in containers or not isinstance(target, ast.Name):
            return None
        var = target.id
        per_layer = None
        for call in self.tree.walk_body(loop.body):
            if not isinstance(call, ast.Call):
                continue
            if isinstance(call.func, ast.Name) and call.func.id == var:
                return self._site(class_name, attr, containers[attr], loop, None)
            if isinstance(call.func, ast.Name) and call.func.id in self.functions and per_layer is None:
                param = parameter_receiving(self.functions[call.func.id], call, var)
                if param is not None:
                    per_layer = (call.func.id, param)
        if per_layer is not None:
            return self._site(class_name, attr, containers[attr], loop, *per_layer)
        return None

    def _site(
        self,
        class_name: str,
        attr: str,
        container,
        node: ast.AST,
        function: str | None,
        module_param: str | None = None,
    ):
        _, blocks, count = container
        if len(blocks) != 1:
            return None
        (block,) = blocks
        if block not in self.classes and function is None:
            return None  # torch's own or another file's class: not ours to decorate here
        return Site(
            owner=class_name,
            attr=attr,
            block=block,
            count=count,
            line=node.lineno,
            function=function,
            module_param=module_param,
        )

    def reachable_sites(self, func: ast.FunctionDef) -> list[Site]:
        """Sites whose blocks a compiled frame ``func`` inlines: in its class or a submodule's
        (transitively), or in the class of a module-level object the function uses."""
        owner = self.tree.enclosing_class(func)
        start: set[str] = set()
        if owner is not None:
            start.add(owner.name)
        else:
            start |= self._instances_named(identifiers(self.tree.walk_body(func.body)))
        reachable, todo = set(), list(start)
        while todo:
            name = todo.pop()
            if name in reachable or name not in self.classes:
                continue
            reachable.add(name)
            for kind, detail in self.members(name)["modules"].values():
                if kind == "class":
                    todo.append(detail)
                elif kind == "container":
                    todo.extend(detail)
        return [s for s in self.sites() if s.owner in reachable]

    def _instances_named(self, names: set[str]) -> set[str]:
        """Classes of this file instantiated into one of ``names`` (``model = Net().eval()``)."""
        classes = set()
        for node in self.tree.order:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
                value = node.value
                while isinstance(value, ast.Call):
                    if isinstance(value.func, ast.Name) and value.func.id in self.classes:
                        classes.add(value.func.id)
                        break
                    value = value.func.value if isinstance(value.func, ast.Attribute) else None
        return classes

    def target_function(self, site: Site) -> ast.FunctionDef | None:
        if site.function is not None:
            return self.functions.get(site.function)
        return self.methods(site.block).get("forward")

    @functools.cached_property
    def eager_backend_line(self) -> int | None:
        """The line of the file's first ``compile(..., backend="eager")``."""
        return next((node.lineno for node in self.tree.order if eager_compile(self.source, node)), None)

    # -- can the block be traced whole? -------------------------------------------------
    def check(self, site: Site) -> Verdict:
        verdict = Verdict()
        target = self.target_function(site)
        if site.function is None:
            RegionWalker(self, verdict, site.block, target, top=True, seen=set()).run()
        else:
            modules = {site.module_param: site.block}
            RegionWalker(self, verdict, None, target, top=True, seen=set(), modules=modules).run()
        return verdict


def _range_count(analysis: Analysis, generators: list[ast.comprehension]) -> int | None:
    if len(generators) != 1:
        return None
    return _count_of(analysis, generators[0].iter)


def _count_of(analysis: Analysis, iterable: ast.expr) -> int | None:
    if isinstance(iterable, ast.Call) and dotted(iterable.func) == "range" and len(args := arguments(iterable)) == 1:
        value = args[0][1]
        if is_int(value):
            return value.value
        if isinstance(value, ast.Name):
            return analysis.constants.get(value.id)
    return None


def _loop_count(analysis: Analysis, node: ast.AST, init: ast.FunctionDef) -> int | None:
    """``for _ in range(N): self.blocks.append(Block())``: N."""
    for parent in analysis.tree.ancestors(node):
        if isinstance(parent, FORS):
            return _count_of(analysis, parent.iter)
        if parent is init:
            return 1
    return None


def already_marked(func: ast.FunctionDef) -> bool:
    for decorator in func.decorator_list:
        expr = decorator.func if isinstance(decorator, ast.Call) else decorator
        if dotted(expr).endswith(("nested_compile_region", "mark_compile_region")):
            return True
    return False


def training_in(source: SourceFile, path: str, nodes=None) -> str | None:
    """Where the file runs a backward pass (``loss.backward()``), if it does: of several, the
    call that ends first (an inner call before the one around it). ``nodes``: all of the file's
    nodes, where they are at hand."""
    calls = [
        node
        for node in (ast.walk(source.syntax) if nodes is None else nodes)
        if isinstance(node, ast.Call)
        and (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "backward"
            or dotted(node.func) in ("torch.autograd.backward", "torch.autograd.grad")
        )
    ]
    if not calls:
        return None
    node = min(calls, key=lambda n: (n.end_lineno, n.end_col_offset, -n.lineno, -n.col_offset))
    return f"`{code_of(source, node)}` at {path}:{node.lineno}"
