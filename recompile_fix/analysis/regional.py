"""Regional compilation (RF007): where a program compiles a whole model, and which stacks of
identical blocks that model runs, so the blocks can be compiled one by one instead.

* ``compile_sites(source)``: the statements that compile a whole module, in the three spellings
  people use: ``compiled = torch.compile(model, ...)``, ``model.compile(...)`` and
  ``@torch.compile`` on a class's ``def forward``.
* ``static_stacks(analysis, site)``: the block stacks the compiled module holds, read from the
  same file (the module's class, its submodules and ModuleDicts, a Sequential, a property, a
  parent class of the file), with the attribute path from the module to each stack.
* ``stack_checks(analysis, block, container)``: what decides whether compiling those blocks one
  by one pays: a key/value cache indexed per layer (every layer would compile on its own), and
  blocks built with their index whose forward reads what the index sets.

The Profile's side (the stacks the recorder saw in a compiled module, matched to the statement
that compiled it) is in ``rules/rf007_regional_compile/rule.py``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from recompile_fix.analysis.ast_tree import DEFS, Def, arguments, code_of, dotted, self_attr, tree_of
from recompile_fix.analysis.block_stacks import Analysis, Site
from recompile_fix.analysis.source import SourceFile

__all__ = [
    "CompileSite",
    "compile_sites",
    "StackRef",
    "StackChecks",
    "stack_checks",
    "static_stacks",
    "turns_off_cache",
]


@dataclass
class CompileSite:
    """A statement that compiles a whole module."""

    kind: str  # "call" (x = torch.compile(m)), "method" (m.compile()) or "decorator"
    line: int  # the statement's (or decorator's) first line
    end_line: int | None
    module: str  # the compiled module as written: "model", "self.model"; the class for a decorator
    target: str | None  # the name the compiled module is bound to ("compiled"); None: the module itself
    keywords: list[str] = field(default_factory=list)  # the compile's arguments as written
    statement: ast.stmt | None = None
    decorated: ast.FunctionDef | ast.AsyncFunctionDef | None = None  # the forward a decorator compiles
    decorator: ast.expr | None = None
    problem: str | None = None  # why the statement cannot be replaced as it is written

    @property
    def called(self) -> str:
        """The name the program calls the compiled module by."""
        return self.target or self.module


def _torch_names(nodes: Iterable[ast.AST]) -> set[str]:
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    names.add(alias.asname or "torch")
    return names


def _compile_keywords(source: SourceFile, call: ast.Call, skip_first: bool) -> tuple[list[str], str | None]:
    keywords, problem = [], None
    for i, (keyword, value, star) in enumerate(arguments(call)):
        if skip_first and i == 0 and keyword is None and not star:
            continue
        if keyword is None and not star:
            problem = f"`{code_of(source, call)}` passes a positional argument besides the module"
            continue
        text = code_of(source, value)
        keywords.append(f"{keyword}={text}" if keyword else f"{star}{text}")
    return keywords, problem


def _is_module_expr(node: ast.expr) -> bool:
    """``model``, ``self.model``, ``trainer.model``: what names a module object."""
    return bool(dotted(node)) and "." not in dotted(node).split(".", 1)[0]


def compile_sites(source: SourceFile) -> list[CompileSite]:
    """Whole-module compiles in the file (statements only: a compile inside an expression, e.g.
    ``DDP(torch.compile(m))``, is not one the rule can replace)."""
    # One pass over the file's nodes picks what the site tests read (big model files have tens of
    # thousands: each walk of them was 25 ms); the Tree is the one RF004 reads too.
    if not _ANY_COMPILE.search(source.text):  # `torch.compile(`, `model.compile(`, `@torch.compile`
        return []
    kinds = (ast.Import, ast.ImportFrom, *DEFS, ast.Assign, ast.Expr, ast.ClassDef)
    nodes = [n for n in tree_of(source).order if isinstance(n, kinds)]
    torch_names = _torch_names(nodes)
    functions = {n.name for n in nodes if isinstance(n, DEFS)}
    imported = {
        (a.asname or a.name).split(".")[0]
        for n in nodes
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    sites = []
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
            call, target = node.value, node.targets[0]
            if (
                dotted(call.func) in {f"{t}.compile" for t in torch_names}
                and call.args
                and not isinstance(call.args[0], ast.Starred)
                and _is_module_expr(call.args[0])
                and dotted(call.args[0]) not in functions
                and dotted(target)
            ):
                module = dotted(call.args[0])
                if module.split(".")[-1] == "forward":
                    continue  # torch.compile(model.forward): a method, not the module
                keywords, problem = _compile_keywords(source, call, skip_first=True)
                sites.append(
                    CompileSite(
                        "call",
                        node.lineno,
                        node.end_lineno,
                        module,
                        dotted(target),
                        keywords,
                        statement=node,
                        problem=problem,
                    )
                )
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr == "compile"
                and _is_module_expr(call.func.value)
                and dotted(call.func.value).split(".")[0] not in torch_names | imported
            ):
                keywords, problem = _compile_keywords(source, call, skip_first=False)
                sites.append(
                    CompileSite(
                        "method",
                        node.lineno,
                        node.end_lineno,
                        dotted(call.func.value),
                        None,
                        keywords,
                        statement=node,
                        problem=problem,
                    )
                )
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if not (isinstance(item, DEFS) and item.name == "forward"):
                    continue
                for decorator in item.decorator_list:
                    expr = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if dotted(expr) in {f"{t}.compile" for t in torch_names}:
                        keywords, problem = (
                            _compile_keywords(source, decorator, skip_first=False)
                            if isinstance(decorator, ast.Call)
                            else ([], None)
                        )
                        sites.append(
                            CompileSite(
                                "decorator",
                                decorator.lineno,
                                decorator.end_lineno,
                                node.name,
                                None,
                                keywords,
                                decorated=item,
                                decorator=decorator,
                                problem=problem,
                            )
                        )
    return sorted(sites, key=lambda s: s.line)


@dataclass
class StackRef:
    """A stack of blocks a compiled module runs, by attribute path from that module."""

    path: str  # "blocks", "transformer.h", "model.layers"
    block: str  # the blocks' class
    file: str  # the file defining it
    line: int | None  # its ``class`` line, when known
    count: int | None
    container: str = "ModuleList"
    site: Site | None = None  # the loop that runs it, when this file shows it
    indexed: bool = False  # built with its index: Block(config, i)


def static_stacks(analysis: Analysis, path: str, class_name: str) -> list[StackRef]:
    """The stacks of blocks a module of ``class_name`` (a class of this file) runs, with the
    attribute path to each: through its submodules, their ModuleDicts and parent classes."""
    paths = {class_name: ""}
    todo = [class_name]
    while todo:  # attribute paths from the module to each class it holds (first found wins)
        name = todo.pop(0)
        for attr, (kind, detail) in analysis.members(name)["modules"].items():
            held = [(attr, detail)] if kind == "class" else []
            if kind == "dict":
                held = [(f"{attr}.{key}", d) for key, (k, d) in detail.items() if k == "class"]
            for where, cls_ in held:
                if cls_ in analysis.classes and cls_ not in paths:
                    paths[cls_] = f"{paths[name]}.{where}".lstrip(".")
                    todo.append(cls_)
    found: dict[tuple[str, str], StackRef] = {}
    for site in analysis.sites():
        owner_path = paths.get(site.owner)
        if owner_path is None:
            continue
        full = f"{owner_path}.{site.attr}".lstrip(".")
        if (full, site.block) in found:
            continue
        kind = analysis.members(site.owner)["containers"][site.attr][0]
        cls_ = analysis.classes.get(site.block)
        found[(full, site.block)] = StackRef(
            path=full,
            block=site.block,
            file=path,
            line=cls_.lineno if cls_ is not None else None,
            count=site.count,
            container=kind,
            site=site,
            indexed=analysis.members(site.owner)["containers"][site.attr][4],
        )
    return list(found.values())


def module_class(analysis: Analysis, site: CompileSite) -> str | None:
    """The class (of this file) of the module a compile site compiles: ``model = GPT(cfg)``,
    ``model = GPT(cfg).to(device).eval()``, ``GPT.from_config(cfg)``; the class itself for a
    decorator. None when the file does not say."""
    if site.kind == "decorator":
        return site.module
    name = site.module
    found = None
    for node in analysis.tree.order:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        if getattr(node, "lineno", 0) > site.line:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(dotted(t) == name for t in targets):
            continue
        value = node.value
        while isinstance(value, ast.Call):
            head = dotted(value.func)
            if head in analysis.classes:
                found = head
                break
            if "." in head and head.rsplit(".", 1)[0] in analysis.classes:  # GPT.from_config(...)
                found = head.rsplit(".", 1)[0]
                break
            if isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "eval", "train", "cuda", "cpu"):
                value = value.func.value
                continue
            found = None
            break
    return found


@dataclass
class StackChecks:
    per_layer_cache: list[str] = field(default_factory=list)
    index_reads: list[str] = field(default_factory=list)
    loop_problem: str | None = None
    unchecked: str | None = None  # why the block's code could not be checked (a risk, not a blocker)


def stack_checks(analysis: Analysis, block: str, site: Site | None) -> StackChecks:
    """What the block's code (in ``analysis``'s file) says about compiling it on its own."""
    checks = StackChecks()
    if block not in analysis.classes:
        return checks
    probe = site or Site(owner="?", attr="?", block=block, count=None, line=0)
    if probe.function is not None:
        checks.loop_problem = (
            f"the model runs its blocks through `{probe.function}(...)`, not by calling them: compiling "
            "each block's forward would not compile what the loop runs"
        )
        return checks
    if analysis.all_methods(block).get("forward") is None:  # `class Layer(nn.TransformerEncoderLayer): ...`
        checks.unchecked = (
            f"`{block}` inherits its forward from a class outside this file, whose code was not "
            "checked for what compiling each block on its own would change"
        )
        return checks
    verdict = analysis.check(Site(owner=probe.owner, attr=probe.attr, block=block, count=probe.count, line=probe.line))
    checks.per_layer_cache = list(verdict.per_layer_cache)
    if site is not None and analysis.members(site.owner)["containers"][site.attr][4]:
        checks.index_reads = _index_reads(analysis, site)
    return checks


def _index_reads(analysis: Analysis, site: Site) -> list[str]:
    """Attributes the block sets from the index it was built with (``self.layer_idx = i``) that
    its forward reads: torch guards an nn.Module's int attributes by value, so each block would
    compile on its own."""
    init = analysis.all_methods(site.block).get("__init__")
    forward = analysis.all_methods(site.block).get("forward")
    if init is None or forward is None:
        return []
    index_params = _index_parameters(analysis, site, init)
    if not index_params:
        return []
    attrs: set[str] = set()
    for node in analysis.tree.walk(init, skip_defs=True):
        if isinstance(node, ast.Assign):
            used = {n.id for n in [node.value, *analysis.tree.walk(node.value)] if isinstance(n, ast.Name)}
            if used & index_params:
                attrs.update(a for t in node.targets if (a := self_attr(t)) is not None)
    reads = []
    for node in analysis.tree.walk(forward, skip_defs=True):
        if isinstance(node, ast.Attribute) and self_attr(node) in attrs and isinstance(node.ctx, ast.Load):
            reads.append(f"`self.{node.attr}` (line {node.lineno})")
    return list(dict.fromkeys(reads))


def _index_parameters(analysis: Analysis, site: Site, init: Def) -> set[str]:
    """The block's ``__init__`` parameters that receive the index of the comprehension or loop
    that builds the container."""
    call, variable = analysis.members(site.owner)["containers"][site.attr][3]
    if call is None or variable is None:
        return set()
    names = [p.arg for p in (*init.args.posonlyargs, *init.args.args)][1:]
    params: set[str] = set()
    position = 0
    for keyword, value, star in arguments(call):
        if star:
            return params
        uses = isinstance(value, ast.Name) and value.id == variable
        if keyword is None:
            if uses and position < len(names):
                params.add(names[position])
            position += 1
        elif uses:
            params.add(keyword)
    return params


def regional_loops(source: SourceFile) -> list[tuple[int, str]]:
    """Blocks already compiled one by one: ``for block in model.blocks: block.compile(...)``, as
    (line, the iterated expression as written)."""
    found: list[tuple[int, str]] = []
    if not _METHOD_COMPILE.search(source.text):  # no `block.compile(...)`: no tree to walk
        return found
    for node in tree_of(source).order:
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name) and _module_expr(node.iter)):
            continue
        for statement in node.body:
            call = statement.value if isinstance(statement, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "compile"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == node.target.id
            ):
                found.append((node.lineno, _module_expr(node.iter)))
    return found


def _module_expr(node: ast.expr) -> str:
    """``model.blocks``, ``model.stages[0].blocks`` (a chain of names, attributes and int
    indexes, as RF007 writes a block stack's path); "" for other expressions."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _module_expr(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and type(node.slice.value) is int
        and node.slice.value >= 0
    ):
        inner = _module_expr(node.value)
        return f"{inner}[{node.slice.value}]" if inner else ""
    return ""


_USE_CACHE_OFF = re.compile(r"use_cache\s*=\s*False")
_METHOD_COMPILE = re.compile(r"\.\s*compile\s*\(")
# What every compile site has written: a dotted name ending in `compile` (not `compiler`,
# `is_compiling`); a line continuation may split it.
_ANY_COMPILE = re.compile(r"\.[\s\\]*compile\b")


def turns_off_cache(source: SourceFile) -> int | None:
    """The line where the program turns transformers' key/value cache off (``use_cache=False``
    in a call, ``config.use_cache = False``), if it does."""
    match = _USE_CACHE_OFF.search(source.text)
    if match is None:
        return None
    return source.text.count("\n", 0, match.start()) + 1
