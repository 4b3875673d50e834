"""Stacks of identical blocks in a module's source, and whether a block's ``forward`` can be
traced whole: the analysis behind RF004 (nested_compile_region).

It reads the file's ``ast`` tree only: static scans run it on every file with a ``ModuleList``,
and libcst's parse and positions cost about ten times as much. ``Analysis(source).sites()``
finds the containers of blocks a class runs in sequence; ``check(site)`` walks the block's
``forward`` (and what it calls in the same file) for what would break the region.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from dataclasses import dataclass, field

from recompile_fix.analysis.source import SourceFile


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


@dataclass
class Verdict:
    hard: list[str] = field(default_factory=list)  # certain errors inside the region: no fix
    mutations: list[str] = field(default_factory=list)  # in-place input / buffer mutation
    unseen: list[str] = field(default_factory=list)  # calls the analysis cannot follow
    risks: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # lines of the code analysed

    def add(self, bucket: list[str], text: str) -> None:
        if text not in bucket and len(bucket) < 6:
            bucket.append(text)


_SAFE_BUILTINS = {
    "len",
    "range",
    "isinstance",
    "issubclass",
    "tuple",
    "list",
    "dict",
    "set",
    "int",
    "float",
    "bool",
    "str",
    "min",
    "max",
    "abs",
    "getattr",
    "hasattr",
    "setattr",
    "zip",
    "enumerate",
    "super",
    "type",
    "reversed",
    "sorted",
    "slice",
    "divmod",
    "round",
    "map",
    "filter",
    "callable",
    "id",
    "iter",
    "next",
}
_BREAKING_BUILTINS = {"print", "input", "breakpoint", "exec", "eval", "open"}
_BREAKING_MODULES = {"logging", "warnings", "pdb"}  # verified: a graph break in the region
_SAFE_MODULES = {"math", "operator"}
_VALUE_READS = {"item", "tolist", "numpy"}
_REDUCTIONS = {
    "any",
    "all",
    "sum",
    "max",
    "min",
    "mean",
    "item",
    "norm",
    "nonzero",
    "equal",
    "allclose",
    "count_nonzero",
    "prod",
    "std",
    "var",
    "amax",
    "amin",
    "argmax",
    "argmin",
}
_VIEWS = {
    "view",
    "view_as",
    "reshape",
    "reshape_as",
    "transpose",
    "permute",
    "expand",
    "expand_as",
    "squeeze",
    "unsqueeze",
    "flatten",
    "unflatten",
    "t",
    "narrow",
    "detach",
    "as_strided",
    "select",
    "diagonal",
    "movedim",
    "swapaxes",
    "swapdims",
    "split",
    "chunk",
    "unbind",
    "contiguous",
    "T",
    "mT",
}
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
_NON_TENSOR_ANNOTATIONS = re.compile(r"^(int|float|bool|str|bytes)(\s*\|\s*None)?$|^Optional\[(int|float|bool|str)\]$")


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
                if _is_int(statement.value):
                    self.constants[target.id] = statement.value.value
                if isinstance(statement.value, ast.Call) and _dotted(statement.value.func).endswith("getLogger"):
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
                    attr = _self_attr(target)
                    if attr is not None:
                        self._member(info, attr, node.value)
            elif isinstance(node, ast.Call):
                name = _dotted(node.func)
                if (
                    name == "self.register_buffer"
                    and (args := _arguments(node))
                    and _simple_string(self.source, args[0][1])
                ):
                    info["buffers"].add(args[0][1].value)
                    info["tensors"].add(args[0][1].value)
                elif (
                    name.startswith("self.")
                    and name.endswith(".append")
                    and name.count(".") == 2
                    and (args := _arguments(node))
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
        name = _dotted(value.func)
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
            name = _dotted(expr.func)
            return name or None
        return None

    def _elements(self, call: ast.Call) -> tuple[set[str], int | None]:
        """The classes a ModuleList / Sequential is built from, and how many, when the source says."""
        blocks: set[str] = set()
        count: int | None = 0
        for keyword, value, _ in _arguments(call):
            if keyword is not None:
                continue
            if isinstance(value, (ast.GeneratorExp, ast.ListComp)):
                block = self._block_of(value.elt)
                blocks.add(block or "?")
                n = _range_count(self, value.generators)
                count = None if (count is None or n is None) else count + n
            elif isinstance(value, (ast.List, ast.Tuple)):
                for element in value.elts:
                    blocks.add(self._block_of(_unstarred(element)) or "?")
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
                if isinstance(node, _FORS):
                    site = self._loop_site(class_name, containers, node)
                elif isinstance(node, ast.Call):
                    attr = _self_attr(node.func)
                    if attr in containers and containers[attr][0] == "Sequential":
                        site = self._site(class_name, attr, containers[attr], node, None)
                if site is not None:
                    found.append(site)
        return found

    def _loop_site(self, class_name: str, containers: dict, loop: ast.For) -> Site | None:
        iterable, target = loop.iter, loop.target
        if isinstance(iterable, ast.Call) and _dotted(iterable.func) == "enumerate" and (args := _arguments(iterable)):
            iterable = args[0][1]
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = _unstarred(target.elts[1])
        if isinstance(iterable, ast.Subscript):
            iterable = iterable.value
        attr = _self_attr(iterable)
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
                param = _parameter_receiving(self.functions[call.func.id], call, var)
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
            start |= self._instances_named(_identifiers(self.tree.walk_body(func.body)))
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
        return next((node.lineno for node in self.tree.order if _eager_compile(self.source, node)), None)

    # -- can the block be traced whole? -------------------------------------------------
    def check(self, site: Site) -> Verdict:
        verdict = Verdict()
        target = self.target_function(site)
        if site.function is None:
            _Walker(self, verdict, site.block, target, top=True, seen=set()).run()
        else:
            modules = {site.module_param: site.block}
            _Walker(self, verdict, None, target, top=True, seen=set(), modules=modules).run()
        return verdict


class _Walker:
    """Walks one function (and what it calls in this file) for what would break the region."""

    def __init__(
        self,
        analysis: Analysis,
        verdict: Verdict,
        owner: str | None,
        func: ast.FunctionDef,
        *,
        top: bool,
        seen: set,
        modules: dict[str, str] | None = None,
    ):
        self.a, self.verdict, self.owner, self.func, self.top, self.seen = analysis, verdict, owner, func, top, seen
        self.source = analysis.source
        self.modules = modules or {}
        every = _parameters(func.args)
        if owner is not None and every and every[0][0].arg == "self":
            every = every[1:]
        self.tensors = {
            p.arg for p, default in every if _maybe_tensor(self.source, p, default) and p.arg not in self.modules
        }
        self.bound = _binding_lines(analysis, func)

    def where(self, node: ast.AST) -> str:
        return f"line {node.lineno}"

    def run(self) -> None:
        if id(self.func) in self.seen:
            return
        self.seen.add(id(self.func))
        self.verdict.spans.append((self.func.lineno, self.func.end_lineno))
        for node in self.a.tree.walk_body(self.func.body, skip_defs=True):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
                self.branch(node.test, node)
            elif isinstance(node, ast.Assert):
                self.branch(node.test, node)
            elif isinstance(node, ast.AugAssign):
                self.mutation(node.target, node, augmented=True)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript):
                        self.mutation(target.value, node, augmented=False)
            elif isinstance(node, ast.Return) and self.top and node.value is not None:
                self.aliasing(node.value, node)

    def fresh(self, name: str, node: ast.AST) -> bool:
        """Is ``name`` still the argument the function was called with at ``node``?"""
        return name in self.tensors and not any(line < node.lineno for line in self.bound.get(name, ()))

    # -- calls ------------------------------------------------------------------------
    def call(self, node: ast.Call) -> None:
        func, verdict = node.func, self.verdict
        name = _dotted(func)
        if isinstance(func, ast.Name):
            self.call_name(func.id, node)
            return
        if not isinstance(func, ast.Attribute):
            verdict.add(
                verdict.unseen,
                f"calls `{code_of(self.source, func)}(...)` ({self.where(node)}), which the analysis cannot follow",
            )
            return
        method = func.attr
        if isinstance(func.value, ast.Call) and _dotted(func.value.func) == "super":
            verdict.add(
                verdict.unseen, f"calls `super().{method}(...)` ({self.where(node)}), which the analysis cannot see"
            )
            return
        parts = name.split(".") if name and not name.startswith(".") else []
        if method in _VALUE_READS:
            verdict.add(
                verdict.hard,
                f"`.{method}()` ({self.where(node)}) reads a tensor into Python: "
                "a graph break, and inside the region an error",
            )
            return
        if not parts:
            return  # a method of a computed value: a tensor op
        root = parts[0]
        if root == "self" and self.owner is not None:
            self.call_self(parts[1:], node)
        elif root in self.a.torch_names:
            if "graph_break" in parts or "breakpoint" in parts:
                verdict.add(
                    verdict.hard, f"`{name}()` ({self.where(node)}) breaks the graph: inside the region an error"
                )
        elif root in self.modules:
            self.call_instance(self.modules[root], parts[1:], node, spelled=root)
        elif root in self.a.loggers or self.a.imports.get(root, "").split(".")[0] in _BREAKING_MODULES:
            verdict.add(
                verdict.hard,
                f"`{name}()` ({self.where(node)}) is not traceable (logging, warnings, "
                "I/O): a graph break, and inside the region an error",
            )
        elif self.a.imports.get(root, "").split(".")[0] in _SAFE_MODULES:
            return
        elif root in self.a.imports or root in self.a.globals or root in self.a.classes:
            verdict.add(
                verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), defined outside what the analysis can see"
            )
        else:  # a local value: a tensor method
            if root in self.tensors and _in_place(method) and self.top and self.fresh(root, node):
                verdict.add(verdict.mutations, f"`{name}()` ({self.where(node)}) mutates the input `{root}` in place")

    def call_name(self, name: str, node: ast.Call) -> None:
        verdict = self.verdict
        if name in _BREAKING_BUILTINS:
            verdict.add(
                verdict.hard,
                f"calls `{name}()` ({self.where(node)}): a graph break, and a graph "
                "break inside the region is an error, even without fullgraph",
            )
        elif name in self.modules:
            self.call_instance(self.modules[name], [], node, spelled=name)
        elif name in self.a.functions:
            _Walker(self.a, verdict, None, self.a.functions[name], top=False, seen=self.seen).run()
        elif name in _SAFE_BUILTINS or name in self.a.torch_names:
            return
        elif name in self.a.imports:
            verdict.add(
                verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), defined outside what the analysis can see"
            )
        else:
            verdict.add(verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), which the analysis cannot follow")

    def call_self(self, parts: list[str], node: ast.Call) -> None:
        self.call_instance(self.owner, parts, node, spelled="self")

    def call_instance(self, class_name: str, parts: list[str], node: ast.Call, spelled: str) -> None:
        """A call on an instance of ``class_name`` (``self.x(...)``, ``block(...)``, ``layer.mix(...)``)."""
        verdict = self.verdict
        text = ".".join([spelled, *parts])
        if class_name not in self.a.classes:
            verdict.add(
                verdict.unseen,
                f"calls `{text}(...)` ({self.where(node)}), a `{class_name}`, defined "
                "outside what the analysis can see",
            )
            return
        members, methods = self.a.members(class_name), self.a.methods(class_name)
        first = parts[0] if parts else "forward"
        if len(parts) <= 1 and first in methods:
            _Walker(self.a, verdict, class_name, methods[first], top=False, seen=self.seen).run()
        elif first in members["modules"]:
            kind, detail = members["modules"][first]
            self.call_member(f"{spelled}.{first}", kind, detail, parts[1:], node)
        elif first in members["tensors"]:
            if first in members["buffers"] and len(parts) == 2 and _in_place(parts[1]):
                verdict.add(verdict.mutations, f"`{text}()` ({self.where(node)}) mutates the buffer `{first}` in place")
        elif len(parts) <= 1:
            verdict.add(
                verdict.unseen, f"`{class_name}.{first}` ({self.where(node)}) is inherited: the analysis cannot see it"
            )
        else:
            verdict.add(verdict.unseen, f"calls `{text}(...)` ({self.where(node)}), which the analysis cannot follow")

    def call_member(self, spelled: str, kind: str, detail, rest: list[str], node: ast.Call) -> None:
        verdict = self.verdict
        if kind == "torch":
            last, tracks = detail
            if tracks and not rest:
                verdict.add(
                    verdict.mutations,
                    f"`{spelled}` ({last}, {self.where(node)}) updates its "
                    "running statistics buffers in place in training mode",
                )
        elif kind == "class":
            self.call_instance(detail, rest, node, spelled)
        elif kind == "container" and not rest:
            for block in sorted(detail):
                if block in self.a.classes:
                    self.call_instance(block, [], node, spelled)
                elif block.split(".")[0] not in self.a.torch_names:
                    verdict.add(
                        verdict.unseen,
                        f"`{spelled}` holds `{block}` ({self.where(node)}), defined outside what the analysis can see",
                    )
        elif kind == "unknown":
            verdict.add(
                verdict.unseen,
                f"calls `{spelled}` ({self.where(node)}), set to `{detail}`, which the analysis cannot follow",
            )

    # -- values -----------------------------------------------------------------------
    def branch(self, test: ast.expr, node: ast.AST) -> None:
        if self.data_dependent(test):
            self.verdict.add(
                self.verdict.hard,
                f"branches on a tensor's value ({self.where(node)}: "
                f"`{code_of(self.source, test)}`): a graph break, and inside the "
                "region an error",
            )

    def data_dependent(self, test: ast.expr) -> bool:
        if isinstance(test, ast.Name):
            return test.id in self.tensors
        if isinstance(test, ast.UnaryOp):
            return self.data_dependent(test.operand)
        if isinstance(test, ast.BoolOp):
            return any(self.data_dependent(value) for value in test.values)
        for node in [test, *self.a.tree.walk(test)]:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = _dotted(node.func)
                root = name.split(".")[0] if name and not name.startswith(".") else ""
                if root in self.a.torch_names:
                    if not node.func.attr.startswith("is_") and node.func.attr in _REDUCTIONS | {"equal"}:
                        return True
                elif root != "self" and node.func.attr in _REDUCTIONS:
                    return True
            if isinstance(node, ast.Compare):
                identity = all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
                operands = [node.left, *node.comparators]
                if not identity and any(isinstance(o, ast.Name) and o.id in self.tensors for o in operands):
                    return True
        return False

    def mutation(self, target: ast.expr, node: ast.stmt, *, augmented: bool) -> None:
        verdict = self.verdict
        attr = _self_attr(target)
        if attr is not None and self.owner is not None and attr in self.a.members(self.owner)["buffers"]:
            verdict.add(
                verdict.mutations,
                f"`{self.source.segment(node).strip()}` ({self.where(node)}) mutates the buffer `{attr}` in place",
            )
        elif isinstance(target, ast.Name) and self.top and self.fresh(target.id, node):
            verdict.add(
                verdict.mutations,
                f"`{self.source.segment(node).strip()}` ({self.where(node)}) mutates the input `{target.id}` in place",
            )

    def aliasing(self, value: ast.expr, node: ast.Return) -> None:
        values = [_unstarred(e) for e in value.elts] if isinstance(value, ast.Tuple) else [value]
        for element in values:
            base = element
            while True:
                if isinstance(base, ast.Subscript):
                    base = base.value
                elif isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr in _VIEWS:
                    base = base.func.value
                elif isinstance(base, ast.Attribute) and base.attr in ("T", "mT", "data"):
                    base = base.value
                else:
                    break
            alias = None
            if isinstance(base, ast.Name) and self.fresh(base.id, node):
                alias = f"its input `{base.id}`" if base is element else f"a view of its input `{base.id}`"
            elif _self_attr(base) in self.a.members(self.owner or "")["tensors"]:
                alias = f"its own tensor `{code_of(self.source, base)}`"
            if alias:
                self.verdict.add(
                    self.verdict.hard,
                    f"returns {alias} ({self.where(node)}): the region cannot "
                    'return an alias of an input ("Higher order ops do not '
                    'support aliasing"); return a copy (`.clone()`)',
                )


# -- helpers ------------------------------------------------------------------------------
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FORS = (ast.For, ast.AsyncFor)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class Tree:
    """Every node of a module (preorder), each subtree's extent and each node's parent, from one
    pass over the nodes' fields (this runs on every file with a ModuleList in static mode).
    Children come in the order libcst's fields have (a def's decorators after its body, a
    class's bases after its body): it decides which of two sites or notes comes first, and the
    rule's output has always followed it."""

    def __init__(self, module: ast.Module):
        self.order: list[ast.AST] = []
        self.end: list[int] = []  # order[i]'s subtree is order[i:end[i]]
        self.index: dict[int, int] = {}
        self.parent: dict[int, ast.AST] = {}
        order, end, index, parents = self.order, self.end, self.index, self.parent
        stack: list[ast.AST | int] = [module]
        while stack:
            node = stack.pop()
            if type(node) is int:  # the subtree of order[node] is complete
                end[node] = len(order)
                continue
            i = len(order)
            index[id(node)] = i
            order.append(node)
            end.append(i + 1)
            children = _children(node)
            if children:
                stack.append(i)
                for child in reversed(children):
                    parents[id(child)] = node
                    stack.append(child)

    def walk(self, root: ast.AST, skip_defs: bool = False):
        """Every node under ``root`` (not ``root`` itself), in order; with ``skip_defs``, not into
        nested functions, classes and lambdas."""
        i = self.index[id(root)]
        return self._span(i + 1, self.end[i], skip_defs)

    def walk_body(self, body: list[ast.stmt], skip_defs: bool = False):
        """The statements of a block and every node under them (a block is no node in ast)."""
        return self._span(self.index[id(body[0])], self.end[self.index[id(body[-1])]], skip_defs)

    def _span(self, i: int, stop: int, skip_defs: bool):
        order, end = self.order, self.end
        while i < stop:
            node = order[i]
            yield node
            i = end[i] if skip_defs and isinstance(node, _SCOPES) else i + 1

    def ancestors(self, node: ast.AST):
        parent = self.parent.get(id(node))
        while parent is not None:
            yield parent
            parent = self.parent.get(id(parent))

    def enclosing_class(self, func: ast.FunctionDef) -> ast.ClassDef | None:
        for parent in self.ancestors(func):
            if isinstance(parent, ast.ClassDef):
                return parent
            if isinstance(parent, (*DEFS, ast.Lambda)):
                return None
        return None


_FIELDS: dict[type, tuple[str, ...]] = {}
# ast shares one Load, Add or Lt object among all its uses, which an index by id() cannot tell
# apart; nothing here asks about them.
_NOT_CHILDREN = {"ctx", "op", "ops"}
# libcst's field order where ast's differs (see Tree).
_LIBCST_ORDER = {
    ast.ClassDef: ("name", "body", "bases", "keywords", "decorator_list", "type_params"),
    ast.ExceptHandler: ("body", "type", "name"),
    ast.match_case: ("pattern", "body", "guard"),
}


def _children(node: ast.AST) -> list[ast.AST]:
    kind = type(node)
    special = _SPECIAL_CHILDREN.get(kind)
    if special is not None:
        return special(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _LIBCST_ORDER.get(kind, kind._fields)
        names = _FIELDS[kind] = tuple(n for n in names if n in kind._fields and n not in _NOT_CHILDREN)
    children = []
    for name in names:
        value = getattr(node, name)
        if type(value) is list:
            if value and isinstance(value[0], ast.AST):  # not a list of names (`global a, b`)
                children += value
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


def _call_children(node: ast.Call) -> list[ast.AST]:
    return [node.func, *_in_source_order(node.args, node.keywords)]


def _dict_children(node: ast.Dict) -> list[ast.AST]:
    children = []
    for key, value in zip(node.keys, node.values):
        if key is not None:  # None: `**other`
            children.append(key)
        children.append(value)
    return children


def _parameter_children(node: ast.arguments) -> list[ast.AST]:
    """Parameters and defaults as libcst orders them: plain, ``*args``, keyword-only, ``**kwargs``,
    positional-only."""
    named = _parameters(node)
    plain, kwonly = len(node.posonlyargs), len(node.posonlyargs) + len(node.args)
    children = []
    for arg, default in [
        *named[plain:kwonly],
        (node.vararg, None),
        *named[kwonly:],
        (node.kwarg, None),
        *named[:plain],
    ]:
        if arg is not None:
            children.append(arg)
        if default is not None:
            children.append(default)
    return children


_SPECIAL_CHILDREN = {ast.Call: _call_children, ast.Dict: _dict_children, ast.arguments: _parameter_children}


def _in_source_order(args: list[ast.expr], keywords: list[ast.keyword]) -> list[ast.AST]:
    """A call's positional and keyword arguments as written (ast lists ``f(a=1, *b)``'s ``*b`` first)."""
    if args and keywords and (keywords[0].lineno, keywords[0].col_offset) < (args[-1].lineno, args[-1].col_offset):
        return sorted([*args, *keywords], key=lambda n: (n.lineno, n.col_offset))
    return [*args, *keywords]


def _arguments(call: ast.Call) -> list[tuple[str | None, ast.expr, str]]:
    """A call's arguments as (keyword, value, star), as written: ``*x`` is (None, x, "*"),
    ``**x`` is (None, x, "**")."""
    found = []
    for arg in _in_source_order(call.args, call.keywords):
        if isinstance(arg, ast.keyword):
            found.append((arg.arg, arg.value, "" if arg.arg else "**"))
        elif isinstance(arg, ast.Starred):
            found.append((None, arg.value, "*"))
        else:
            found.append((None, arg, ""))
    return found


def _parameters(args: ast.arguments) -> list[tuple[ast.arg, ast.expr | None]]:
    """The named parameters (positional-only, plain, keyword-only; not ``*args`` or ``**kwargs``)
    with their defaults."""
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + args.defaults
    return [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]


def _parameter_receiving(func: ast.FunctionDef, call: ast.Call, var: str) -> str | None:
    """The parameter of ``func`` that ``call`` passes the name ``var`` to."""
    positional = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
    index = 0
    for keyword, value, star in _arguments(call):
        if star:
            return None
        if keyword is not None:
            if isinstance(value, ast.Name) and value.id == var:
                return keyword
            continue
        if isinstance(value, ast.Name) and value.id == var:
            return positional[index] if index < len(positional) else None
        index += 1
    return None


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names; "" for other expressions, so ``f().x`` gives ".x"."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _self_attr(node) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def class_name(node: ast.ClassDef | None) -> str | None:
    return node.name if node is not None else None


def _unstarred(node: ast.expr) -> ast.expr:
    return node.value if isinstance(node, ast.Starred) else node


def _is_int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int  # not True / False


def _in_place(method: str) -> bool:
    return method.endswith("_") and not method.startswith("_")


def code_of(source: SourceFile, node: ast.AST) -> str:
    """A node's text without its own parentheses, which ast counts in a tuple's and a generator
    expression's extent (and nowhere else)."""
    text = source.segment(node)
    if isinstance(node, (ast.Tuple, ast.GeneratorExp)) and _wrapped(text):
        return text[1:-1].strip()
    return text


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of ``text`` that are not layout (an empty list where it does not tokenize)."""
    layout = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        return [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in layout]
    except (tokenize.TokenError, SyntaxError):
        return []


def _wrapped(text: str) -> bool:
    """Is ``text`` one parenthesized whole, ``( ... )`` (not ``(a), (b)``)?"""
    tokens = _tokens(text)
    depth = 0
    for i, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in ("(", "[", "{"):
            depth += 1
        elif token.type == tokenize.OP and token.string in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return tokens[0].string == "(" and i == len(tokens) - 1
    return False


def _simple_string(source: SourceFile, node: ast.AST) -> bool:
    """One string literal: not an f-string, nor literals written side by side (``"a" "b"``),
    which ast joins into one constant."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))):
        return False
    return sum(t.type == tokenize.STRING for t in _tokens(f"({source.segment(node)})")) == 1


def _eager_compile(source: SourceFile, node: ast.AST) -> bool:
    """``torch.compile(..., backend="eager")`` (or any ``...compile``)."""
    return (
        isinstance(node, ast.Call)
        and _dotted(node.func).endswith("compile")
        and any(
            k.arg == "backend"
            and isinstance(k.value, ast.Constant)
            and k.value.value == "eager"
            and _simple_string(source, k.value)
            for k in node.keywords
        )
    )


def _identifiers(nodes) -> set[str]:
    """The identifiers among ``nodes``: names, attribute and keyword names, parameters, and what a
    def, class, import, ``global`` or ``except ... as`` names."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.keyword, ast.arg)):
            if node.arg:
                found.add(node.arg)
        elif isinstance(node, (*DEFS, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.update(part for part in node.name.split(".") if part != "*")
            if node.asname:
                found.add(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update(node.module.split("."))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
        elif isinstance(node, ast.MatchClass):
            found.update(node.kwd_attrs)
    return found


def _range_count(analysis: Analysis, generators: list[ast.comprehension]) -> int | None:
    if len(generators) != 1:
        return None
    return _count_of(analysis, generators[0].iter)


def _count_of(analysis: Analysis, iterable: ast.expr) -> int | None:
    if isinstance(iterable, ast.Call) and _dotted(iterable.func) == "range" and len(args := _arguments(iterable)) == 1:
        value = args[0][1]
        if _is_int(value):
            return value.value
        if isinstance(value, ast.Name):
            return analysis.constants.get(value.id)
    return None


def _loop_count(analysis: Analysis, node: ast.AST, init: ast.FunctionDef) -> int | None:
    """``for _ in range(N): self.blocks.append(Block())``: N."""
    for parent in analysis.tree.ancestors(node):
        if isinstance(parent, _FORS):
            return _count_of(analysis, parent.iter)
        if parent is init:
            return 1
    return None


def _maybe_tensor(source: SourceFile, param: ast.arg, default: ast.expr | None) -> bool:
    annotation = param.annotation
    if annotation is not None:
        # A parenthesized annotation, `(int | None)`, was never matched whole (its text kept the
        # parentheses); ast's extent leaves them out.
        before = source.lines[annotation.lineno - 1][: source.char_column(annotation.lineno, annotation.col_offset)]
        matched = not before.rstrip().endswith("(") and _NON_TENSOR_ANNOTATIONS.match(
            source.segment(annotation).strip()
        )
        if matched or _dotted(annotation) in ("int", "float", "bool", "str"):
            return False
    if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
        return False
    return True


def _binding_lines(analysis: Analysis, func: ast.FunctionDef) -> dict[str, list[int]]:
    """Lines where each name is (re)bound in the function: assignments, loops, with-as."""
    bound: dict[str, list[int]] = {}

    def names(target) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for e in target.elts for n in names(e)]
        if isinstance(target, ast.Starred):
            return names(target.value)
        return []

    for node in analysis.tree.walk_body(func.body, skip_defs=True):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, *_FORS, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        if targets:
            # A with item has no position of its own: its expression's.
            line = node.context_expr.lineno if isinstance(node, ast.withitem) else node.lineno
            for target in targets:
                for name in names(target):
                    bound.setdefault(name, []).append(line)
    return bound


def already_marked(func: ast.FunctionDef) -> bool:
    for decorator in func.decorator_list:
        expr = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _dotted(expr).endswith(("nested_compile_region", "mark_compile_region")):
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
            or _dotted(node.func) in ("torch.autograd.backward", "torch.autograd.grad")
        )
    ]
    if not calls:
        return None
    node = min(calls, key=lambda n: (n.end_lineno, n.end_col_offset, -n.lineno, -n.col_offset))
    return f"`{code_of(source, node)}` at {path}:{node.lineno}"
