"""Stacks of identical blocks in a module's source: the analysis behind RF004 (nested_compile_region).

It reads the file's ``ast`` tree only: static scans run it on every file with a ``ModuleList``,
and libcst's parse and positions cost about ten times as much. ``Analysis(source).sites()``
finds the containers of blocks a class runs in sequence; ``check(site)`` asks ``region_check``
whether the block's ``forward`` can be traced whole.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from recompile_fix.analysis.aliasing import Aliases
from recompile_fix.analysis.ast_tree import (
    DEFS,
    FORS,
    Def,
    Loop,
    Tree,
    arguments,
    code_of,
    dotted,
    eager_compile,
    identifiers,
    int_value,
    parameter_receiving,
    self_attr,
    simple_string,
    tree_of,
    unstarred,
)
from recompile_fix.analysis.region_check import RegionWalker, Verdict
from recompile_fix.analysis.source import SourceError, SourceFile

if TYPE_CHECKING:
    from recompile_fix.profile.model import Profile

__all__ = [
    "already_marked",
    "Analysis",
    "Members",
    "MIN_BLOCKS",
    "recorded_too_few",
    "REGION_DECORATORS",
    "Site",
    "training_in",
    "training_in_any",
]

# Below this the saving (about one block's compile per block) is not worth a region (RF004) or
# compiling the blocks one by one (RF007).
MIN_BLOCKS = 4


def recorded_too_few(profile: Profile, blocks: Iterable[tuple[str, str]]) -> bool:
    """Whether the run recorded each of ``blocks`` ((file, class name) pairs) in a compiled module,
    and every time fewer than ``MIN_BLOCKS`` of it (a config's ``n_layer=1``): a static finding
    about them is then contradicted by the run."""
    blocks = list(blocks)
    counts: dict[tuple[str, str], list[int]] = {block: [] for block in blocks}
    for frame in profile.frames:
        for stack in frame.block_stacks:
            key = (stack.file, stack.block.rsplit(".", 1)[-1])
            if key in counts:
                counts[key].append(stack.count)
    return bool(blocks) and all(found and max(found) < MIN_BLOCKS for found in counts.values())


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


class Members(TypedDict):
    """What a class's ``__init__`` sets on ``self`` (``Analysis.members``)."""

    modules: dict[str, tuple[str, Any]]  # attr -> (kind, detail), as _module_kind says
    tensors: set[str]
    buffers: set[str]
    # attribute path -> [kind, classes, count, (element call, loop variable), built with the loop variable]
    containers: dict[str, list[Any]]
    ordered: dict[str, list[str | None]]  # attribute path -> the blocks' classes in order (None: not known)


class Analysis:
    """What one file says about its modules: containers of blocks, submodules, and whether a
    block's forward can be traced whole."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.tree = tree_of(source)
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
        self._members: dict[str, Members] = {}
        self._methods: dict[str, dict[str, Def]] = {}
        # What _module_kind saw, by the id() of the call that builds it.
        self._containers_built: dict[int, list[Any]] = {}
        self._ordered_built: dict[int, list[str | None]] = {}
        self._dict_values: dict[tuple[int, str], ast.expr] = {}

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
                value = int_value(statement.value)
                if value is not None:
                    self.constants[target.id] = value
                if isinstance(statement.value, ast.Call) and dotted(statement.value.func).endswith("getLogger"):
                    self.loggers.add(target.id)

    def _imported(self, bound: str, what: str) -> None:
        if what.split(".")[0] == "torch":
            self.torch_names.add(bound)
        else:
            self.imports[bound] = what

    def function_def(self, first_line: int, name: str) -> Def | None:
        """The def a code object came from (``co_firstlineno`` counts decorators)."""
        return self.source.syntax_def(first_line, name)

    # -- classes ----------------------------------------------------------------------
    def methods(self, class_name: str) -> dict[str, Def]:
        found = self._methods.get(class_name)
        if found is None:
            cls_ = self.classes.get(class_name)
            found = {} if cls_ is None else {s.name: s for s in cls_.body if isinstance(s, DEFS)}
            self._methods[class_name] = found
        return found

    def bases(self, class_name: str) -> list[str]:
        """The class's bases defined in this file (``class GPT(Base)``), nearest first."""
        cls_ = self.classes.get(class_name)
        if cls_ is None:
            return []
        return [dotted(b) for b in cls_.bases if dotted(b) in self.classes and dotted(b) != class_name]

    def all_methods(self, class_name: str, _seen: frozenset[str] = frozenset()) -> dict[str, Def]:
        """The class's methods and those it inherits from bases in this file (its own win)."""
        found: dict[str, Def] = {}
        for base in reversed(self.bases(class_name)):
            if base not in _seen:
                found.update(self.all_methods(base, _seen | {class_name}))
        found.update(self.methods(class_name))
        return found

    def members(self, class_name: str) -> Members:
        """``self.x = ...`` in ``__init__`` (its own and its bases' in this file): submodules
        (kind, detail), parameters and buffers, and containers of blocks by attribute path
        (``blocks``, or ``transformer.h`` for a ModuleList held in a ModuleDict). A container is
        [kind, classes, count, (element call, loop variable), built with the loop variable]."""
        if class_name in self._members:
            return self._members[class_name]
        info: Members = {"modules": {}, "tensors": set(), "buffers": set(), "containers": {}, "ordered": {}}
        self._members[class_name] = info
        for base in reversed(self.bases(class_name)):
            inherited = self.members(base)
            info["modules"].update(inherited["modules"])
            info["containers"].update(inherited["containers"])
            info["ordered"].update(inherited["ordered"])
            info["tensors"] |= inherited["tensors"]
            info["buffers"] |= inherited["buffers"]
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
                if name == "self.register_buffer" and (args := arguments(node)):
                    buffer = _string_value(self.source, args[0][1])
                    if buffer is not None:
                        info["buffers"].add(buffer)
                        info["tensors"].add(buffer)
                elif (
                    name.startswith("self.")
                    and name.endswith(".append")
                    and name.count(".") == 2
                    and (args := arguments(node))
                ):
                    attr = name.split(".")[1]
                    block = self._block_of(args[0][1])
                    if attr in info["containers"] and block is not None:
                        container = info["containers"][attr]
                        container[1].add(block)
                        container[2] = _loop_count(self, node, init)
                        loop = _enclosing_loop(self, node, init)
                        if loop is not None and isinstance(loop.target, ast.Name) and isinstance(args[0][1], ast.Call):
                            container[3] = (args[0][1], loop.target.id)
                            container[4] = _passes(container[3])
                        order = info["ordered"].setdefault(attr, [])
                        # An append under a branch or a loop: the positions after it are unknown.
                        order.append(block if _unconditional(self, node, init) else None)
        return info

    def _member(self, info: Members, attr: str, value: ast.expr) -> None:
        kind, detail = self._module_kind(value)
        if kind == "tensor":
            info["tensors"].add(attr)
            return
        info["modules"][attr] = (kind, detail)
        if kind == "container":
            info["containers"][attr] = list(self._containers_built[id(value)])
            info["ordered"][attr] = list(self._ordered_built[id(value)])
        elif kind == "dict":  # a ModuleDict: its containers by path (nanoGPT's transformer.h)
            for key, (sub_kind, _) in detail.items():
                if sub_kind == "container":
                    call = self._dict_values[(id(value), key)]
                    info["containers"][f"{attr}.{key}"] = list(self._containers_built[id(call)])
                    info["ordered"][f"{attr}.{key}"] = list(self._ordered_built[id(call)])

    def _module_kind(self, value: ast.expr) -> tuple[str, Any]:
        """What ``self.x = value`` holds: a tensor, a container of blocks, a ModuleDict, one of
        torch's modules, a class of this file, or something the analysis cannot follow."""
        if not isinstance(value, ast.Call):
            return ("unknown", code_of(self.source, value))
        name = dotted(value.func)
        last = name.rsplit(".", 1)[-1]
        root = name.split(".")[0]
        if (
            last in ("Parameter", "tensor", "zeros", "ones", "randn", "empty", "full", "arange")
            and root in self.torch_names
        ):
            return ("tensor", None)
        if last in ("ModuleList", "Sequential") and root in self.torch_names:
            blocks, count, element = self._elements(value)
            self._containers_built[id(value)] = [last, blocks, count, element, _passes(element)]
            self._ordered_built[id(value)] = self._order(value)
            return ("container", blocks)
        if last == "ModuleDict" and root in self.torch_names:
            entries: dict[str, tuple[str, Any]] = {}
            for key, item in _dict_items(value):
                self._dict_values[(id(value), key)] = item
                entries[key] = self._module_kind(item)
            return ("dict", entries)
        if root in self.torch_names:
            tracks = last in _BATCHNORMS or (
                last in _INSTANCENORMS
                and any(
                    k.arg == "track_running_stats" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in value.keywords
                )
            )
            return ("torch", (last, tracks))
        if name in self.classes:
            return ("class", name)
        return ("unknown", code_of(self.source, value.func))

    def _order(self, call: ast.Call) -> list[str | None]:
        """The classes of a ModuleList / Sequential built from a literal list, in order (None
        where the source does not say: a comprehension, a starred value)."""
        order: list[str | None] = []
        for keyword, value, star in arguments(call):
            if keyword is not None:
                continue
            if isinstance(value, (ast.List, ast.Tuple)) and star in ("", "*"):
                order.extend(None if isinstance(e, ast.Starred) else self._block_of(e) for e in value.elts)
            elif star:
                order.append(None)
                break
            elif isinstance(value, (ast.GeneratorExp, ast.ListComp)):
                order.append(None)
                break
            else:
                order.append(self._block_of(value))
        return order

    def container_path(self, class_name: str, expr: ast.expr) -> str | None:
        """The attribute path of ``self.a``, ``self.a.b``, ``self.a["b"]`` (a ModuleDict entry)
        or a property returning one of those; None for anything else."""
        parts: list[str] = []
        node = expr
        while True:
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                parts.append(node.slice.value)
                node = node.value
            else:
                break
        if not (isinstance(node, ast.Name) and node.id == "self" and parts):
            return None
        parts.reverse()
        returned = self._property_value(class_name, parts[0])
        if returned is not None:
            inner = self.container_path(class_name, returned)
            if inner is None:
                return None
            parts = inner.split(".") + parts[1:]
        return ".".join(parts)

    def _property_value(self, class_name: str, name: str) -> ast.expr | None:
        """What a ``@property`` of the class returns, when its body is one ``return``."""
        method = self.all_methods(class_name).get(name)
        if method is None or not any(
            dotted(d).rsplit(".", 1)[-1] in ("property", "cached_property") for d in method.decorator_list
        ):
            return None
        body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
            return body[0].value
        return None

    def _block_of(self, expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Call):
            name = dotted(expr.func)
            return name or None
        return None

    def _elements(self, call: ast.Call) -> tuple[set[str], int | None, tuple[ast.Call | None, str | None]]:
        """The classes a ModuleList / Sequential is built from, how many (when the source says),
        and for a comprehension the element's call and the loop variable (``Block(cfg, i) for i
        in range(n)``)."""
        blocks: set[str] = set()
        count: int | None = 0
        element: tuple[ast.Call | None, str | None] = (None, None)
        for keyword, value, _ in arguments(call):
            if keyword is not None:
                continue
            if isinstance(value, (ast.GeneratorExp, ast.ListComp)):
                block = self._block_of(value.elt)
                blocks.add(block or "?")
                n = _range_count(self, value.generators)
                count = None if (count is None or n is None) else count + n
                target = value.generators[0].target if len(value.generators) == 1 else None
                if isinstance(value.elt, ast.Call) and isinstance(target, ast.Name):
                    element = (value.elt, target.id)
            elif isinstance(value, (ast.List, ast.Tuple)):
                for item in value.elts:
                    blocks.add(self._block_of(unstarred(item)) or "?")
                count = None if count is None else count + len(value.elts)
            else:
                blocks.add(self._block_of(value) or "?")
                count = None if count is None else count + 1
        return blocks, count, element

    # -- sites ------------------------------------------------------------------------
    def sites(self) -> list[Site]:
        found: list[Site] = []
        for class_name in self.classes:
            found.extend(self._class_sites(class_name))
        return found

    def _class_sites(self, class_name: str) -> list[Site]:
        containers = self.members(class_name)["containers"]
        found: list[Site] = []
        if not containers:
            return found  # no loop over, nor call of, a container of blocks
        for method in self.all_methods(class_name).values():
            if method.name == "__init__":
                continue
            for node in self.tree.walk(method):
                site = None
                if isinstance(node, FORS):
                    site = self._loop_site(class_name, containers, node)
                elif isinstance(node, ast.Call):
                    path = self.container_path(class_name, node.func)
                    if path is not None and path in containers and containers[path][0] == "Sequential":
                        site = self._site(class_name, path, containers[path], node, None)
                if site is not None:
                    found.append(site)
        return found

    def _loop_site(self, class_name: str, containers: dict[str, list[Any]], loop: Loop) -> Site | None:
        iterable, target = loop.iter, loop.target
        if isinstance(iterable, ast.Call) and dotted(iterable.func) == "enumerate" and (args := arguments(iterable)):
            iterable = args[0][1]
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = unstarred(target.elts[1])
        if isinstance(iterable, ast.Subscript) and not (
            isinstance(iterable.slice, ast.Constant) and isinstance(iterable.slice.value, str)
        ):
            iterable = iterable.value  # a slice of the container: self.blocks[:4]
        attr = self.container_path(class_name, iterable)
        if attr is None or attr not in containers or not isinstance(target, ast.Name):
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
        container: list[Any],
        node: ast.stmt | ast.expr,
        function: str | None,
        module_param: str | None = None,
    ) -> Site | None:
        blocks, count = container[1], container[2]
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

    def reachable_sites(self, func: Def) -> list[Site]:
        """Sites whose blocks a compiled frame ``func`` inlines: in its class or a submodule's
        (transitively), or in the class of a module-level object the function uses."""
        owner = self.tree.enclosing_class(func)
        start: set[str] = set()
        if owner is not None:
            start.add(owner.name)
        else:
            start |= self._instances_named(identifiers(self.tree.walk_body(func.body)))
        reachable: set[str] = set()
        todo = list(start)
        while todo:
            name = todo.pop()
            if name in reachable or name not in self.classes:
                continue
            reachable.add(name)
            todo.extend(self.bases(name))
            for kind, detail in self.members(name)["modules"].values():
                todo.extend(_classes_in(kind, detail))
        return [s for s in self.sites() if s.owner in reachable]

    def _instances_named(self, names: set[str]) -> set[str]:
        """Classes of this file instantiated into one of ``names`` (``model = Net().eval()``)."""
        classes: set[str] = set()
        for node in self.tree.order:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
                value: ast.expr | None = node.value
                while isinstance(value, ast.Call):
                    if isinstance(value.func, ast.Name) and value.func.id in self.classes:
                        classes.add(value.func.id)
                        break
                    value = value.func.value if isinstance(value.func, ast.Attribute) else None
        return classes

    def target_function(self, site: Site) -> Def | None:
        if site.function is not None:
            return self.functions.get(site.function)
        return self.methods(site.block).get("forward")

    @functools.cached_property
    def aliases(self) -> Aliases:
        """What the functions of this file may return, each summarised once."""
        return Aliases(self)

    @functools.cached_property
    def eager_backend_line(self) -> int | None:
        """The line of the file's first ``compile(..., backend="eager")``."""
        if "eager" not in self.source.text:
            return None
        calls = (node for node in self.tree.order if isinstance(node, ast.Call))
        return next((call.lineno for call in calls if eager_compile(self.source, call)), None)

    # -- can the block be traced whole? -------------------------------------------------
    def check(self, site: Site) -> Verdict:
        verdict = Verdict()
        # The forward that runs: the block's own, or one it inherits from a class of this file
        # (RF007 checks `class Block(Base): pass`; RF004 checks only a forward of the block's own).
        target = (
            self.target_function(site) if site.function is not None else self.all_methods(site.block).get("forward")
        )
        assert target is not None, f"`{site.block}` has no forward in this file to check"
        if site.function is None:
            RegionWalker(self, verdict, site.block, target, top=True, seen=set()).run()
        else:
            assert site.module_param is not None  # _loop_site sets it with the function
            modules = {site.module_param: site.block}
            RegionWalker(self, verdict, None, target, top=True, seen=set(), modules=modules).run()
        return verdict


def _classes_in(kind: str, detail: Any) -> list[str]:
    """The classes a member of ``kind`` holds (a ModuleDict's entries included)."""
    if kind == "class":
        return [detail]
    if kind == "container":
        return sorted(detail)
    if kind == "dict":
        return [c for sub_kind, sub_detail in detail.values() for c in _classes_in(sub_kind, sub_detail)]
    return []


def _dict_items(call: ast.Call) -> list[tuple[str, ast.expr]]:
    """The entries of ``nn.ModuleDict(dict(a=..., b=...))`` or ``nn.ModuleDict({"a": ...})``."""
    args = [value for keyword, value, star in arguments(call) if keyword is None and not star]
    if len(args) != 1:
        return []
    value = args[0]
    if isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args:
        return [(k.arg, k.value) for k in value.keywords if k.arg is not None]
    if isinstance(value, ast.Dict):
        return [
            (k.value, v)
            for k, v in zip(value.keys, value.values)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        ]
    return []


def _string_value(source: SourceFile, node: ast.expr) -> str | None:
    """The text of one plain string literal (``simple_string``), else None."""
    if simple_string(source, node) and isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _passes(element: tuple[ast.Call | None, str | None]) -> bool:
    """Does the element's call pass the loop variable (``Block(cfg, i)``, ``Block(layer_idx=i)``)?"""
    call, variable = element
    return call is not None and any(
        isinstance(value, ast.Name) and value.id == variable for _, value, _ in arguments(call)
    )


def _enclosing_loop(analysis: Analysis, node: ast.AST, init: Def) -> Loop | None:
    for parent in analysis.tree.ancestors(node):
        if parent is init:
            return None
        if isinstance(parent, FORS):
            return parent
    return None


def _unconditional(analysis: Analysis, node: ast.AST, init: Def) -> bool:
    """Does ``node`` run exactly once whenever ``init`` runs (no branch or loop around it)?"""
    for parent in analysis.tree.ancestors(node):
        if parent is init:
            return True
        if isinstance(parent, (ast.If, ast.IfExp, ast.While, ast.Try, ast.Match, *FORS)):
            return False
    return False


def _range_count(analysis: Analysis, generators: list[ast.comprehension]) -> int | None:
    if len(generators) != 1:
        return None
    return _count_of(analysis, generators[0].iter)


def _count_of(analysis: Analysis, iterable: ast.expr) -> int | None:
    if isinstance(iterable, ast.Call) and dotted(iterable.func) == "range" and len(args := arguments(iterable)) == 1:
        value = args[0][1]
        count = int_value(value)
        if count is not None:
            return count
        if isinstance(value, ast.Name):
            return analysis.constants.get(value.id)
    return None


def _loop_count(analysis: Analysis, node: ast.AST, init: Def) -> int | None:
    """``for _ in range(N): self.blocks.append(Block())``: N."""
    for parent in analysis.tree.ancestors(node):
        if isinstance(parent, FORS):
            return _count_of(analysis, parent.iter)
        if parent is init:
            return 1
    return None


REGION_DECORATORS = ("nested_compile_region", "mark_compile_region")  # torch's name, and its older one


def already_marked(func: Def) -> bool:
    for decorator in func.decorator_list:
        expr = decorator.func if isinstance(decorator, ast.Call) else decorator
        if dotted(expr).endswith(REGION_DECORATORS):
            return True
    return False


# `.backward` (a line continuation may split it) or `autograd` (`torch.autograd.grad(...)`).
_BACKWARD_WORDS = re.compile(r"\.[\s\\]*backward\b|\bautograd\b")


def training_in(source: SourceFile, path: str, tree: Tree | None = None) -> str | None:
    """Where the file runs a backward pass (``loss.backward()``), if it does: of several, the
    call that ends first (an inner call before the one around it). ``tree``: the file's, where it
    is at hand."""
    if not _BACKWARD_WORDS.search(source.text):
        return None  # what both kinds of call have written
    calls = [
        node
        for node in (ast.walk(source.syntax) if tree is None else tree.order)
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


def training_in_any(sources: Iterable[tuple[str, SourceFile | None]]) -> str | None:
    """``training_in`` of the first of the (path, source) files that trains; a file missing or
    that does not parse is skipped."""
    for path, source in sources:
        if source is None:
            continue
        try:
            found = training_in(source, path)
        except SourceError:
            continue
        if found:
            return found
    return None
