"""Can a block's ``forward`` be traced whole, as one compiled region? A walk of the function (and
what it calls in the same file) for what would break the graph, mutate state in training, or
return its input: RF004's ``Verdict``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recompile_fix.analysis.aliasing import AliasFlow, check_outputs
from recompile_fix.analysis.ast_tree import (
    FORS,
    Def,
    arguments,
    code_of,
    dotted,
    in_place,
    parameters,
    self_attr,
)
from recompile_fix.analysis.source import SourceFile

__all__ = ["binding_lines", "RegionWalker", "Verdict"]

if TYPE_CHECKING:
    from recompile_fix.analysis.block_stacks import Analysis


@dataclass
class Verdict:
    hard: list[str] = field(default_factory=list)  # certain errors inside the region: no fix
    mutations: list[str] = field(default_factory=list)  # in-place input / buffer mutation
    unseen: list[str] = field(default_factory=list)  # calls the analysis cannot follow
    risks: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # lines of the code analysed
    # A cache object updated with a per-layer index (`cache.update(k, v, self.layer_idx)`):
    # compiled one by one, each block would compile on its own.
    per_layer_cache: list[str] = field(default_factory=list)

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


# Parameter names transformers (and models written like them) give a key/value cache object.
CACHE_NAMES = {"cache", "past_key_value", "past_key_values", "layer_past", "kv_cache", "past", "cache_params"}


_NON_TENSOR_ANNOTATIONS = re.compile(r"^(int|float|bool|str|bytes)(\s*\|\s*None)?$|^Optional\[(int|float|bool|str)\]$")


class RegionWalker:
    """Walks one function (and what it calls in this file) for what would break the region."""

    def __init__(
        self,
        analysis: Analysis,
        verdict: Verdict,
        owner: str | None,
        func: Def,
        *,
        top: bool,
        seen: set[int],
        modules: dict[str, str] | None = None,
    ):
        self.a, self.verdict, self.owner, self.func, self.top, self.seen = analysis, verdict, owner, func, top, seen
        self.source = analysis.source
        self.modules = modules or {}
        every = parameters(func.args)
        if owner is not None and every and every[0][0].arg == "self":
            every = every[1:]
        self.tensors = {
            p.arg for p, default in every if _maybe_tensor(self.source, p, default) and p.arg not in self.modules
        }
        self.params = {p.arg for p, _ in every}
        self.bound = binding_lines(analysis, func)

    def where(self, node: ast.expr | ast.stmt) -> str:
        return f"line {node.lineno}"

    def run(self) -> None:
        if id(self.func) in self.seen:
            return
        self.seen.add(id(self.func))
        self.verdict.spans.append((self.func.lineno, self.func.end_lineno or self.func.lineno))
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
        # What the region's outputs alias (the top function), and views any function it runs
        # stores on an object: errors the compiled region raises even in inference.
        flow = AliasFlow(self.a.aliases, self.owner, self.func, self.modules)
        flow.run()
        for problem in flow.stores:
            self.verdict.add(self.verdict.hard, problem)
        if self.top:
            for problem in check_outputs(flow, self.tensors):
                self.verdict.add(self.verdict.hard, problem)

    def fresh(self, name: str, node: ast.expr | ast.stmt) -> bool:
        """Is ``name`` still the argument the function was called with at ``node``?"""
        return name in self.tensors and not any(line < node.lineno for line in self.bound.get(name, ()))

    # -- calls ------------------------------------------------------------------------
    def call(self, node: ast.Call) -> None:
        func, verdict = node.func, self.verdict
        name = dotted(func)
        if isinstance(func, ast.Name):
            self.call_name(func.id, node)
            return
        if isinstance(func, ast.Subscript) and self.call_element(func, node):
            return
        if not isinstance(func, ast.Attribute):
            verdict.add(
                verdict.unseen,
                f"calls `{code_of(self.source, func)}(...)` ({self.where(node)}), which the analysis cannot follow",
            )
            return
        method = func.attr
        if isinstance(func.value, ast.Call) and dotted(func.value.func) == "super":
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
        elif root in CACHE_NAMES and method == "update" and len(parts) == 2 and root in self.params:
            self.cache_update(node)
            verdict.add(verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), which the analysis cannot follow")
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
            if root in self.tensors and in_place(method) and self.top and self.fresh(root, node):
                verdict.add(verdict.mutations, f"`{name}()` ({self.where(node)}) mutates the input `{root}` in place")

    def call_element(self, func: ast.Subscript, node: ast.Call) -> bool:
        """``self.layer[0](...)``: an element of a container of this file's classes (all of
        them where the index does not say which). False where it is something else."""
        if self.owner is None or not isinstance(func.slice, ast.Constant) or not isinstance(func.slice.value, int):
            return False
        path = self.a.container_path(self.owner, func.value)
        members = self.a.members(self.owner)
        if path not in members["containers"]:
            return False
        index = func.slice.value
        order = members["ordered"].get(path) or []
        known = order[: index + 1] if index >= 0 else []
        block = known[index] if len(known) == index + 1 and None not in known else None
        if block is not None:
            classes = [block]
        else:
            classes = sorted(members["containers"][path][1])
        for class_name in classes:
            self.call_instance(class_name, [], node, spelled=code_of(self.source, func))
        return True

    def cache_update(self, node: ast.Call) -> None:
        """``cache.update(k, v, self.layer_idx)``: a key/value cache kept per layer. Two things
        follow. Compiled one by one (RF007), each layer compiles on its own (the cache's state
        differs per layer: measured, 4 compiles for 4 Llama layers). And a sliding-window cache
        (transformers' DynamicSlidingWindowLayer) stores a `.to()` alias of a tensor made outside
        the region on the cache, which a compiled region rejects (measured: Mistral)."""
        text = f"`{code_of(self.source, node.func)}(...)` (line {node.lineno})"
        if any(isinstance(a, ast.Attribute) and self_attr(a) is not None for _, a, _ in arguments(node)):
            self.verdict.add(self.verdict.per_layer_cache, text)
        if "sliding_window" in self.source.text:
            self.verdict.add(
                self.verdict.hard,
                f"updates a key/value cache {text} in a model with a sliding window: the sliding-window "
                "cache stores a `.to()` alias of a tensor made outside the region on the cache object "
                '(torch: "An intermediate tensor ... aliases an input or output"; measured with Mistral)',
            )

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
            RegionWalker(self.a, verdict, None, self.a.functions[name], top=False, seen=self.seen).run()
        elif name in _SAFE_BUILTINS or name in self.a.torch_names:
            return
        elif name in self.a.imports:
            verdict.add(
                verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), defined outside what the analysis can see"
            )
        else:
            verdict.add(verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), which the analysis cannot follow")

    def call_self(self, parts: list[str], node: ast.Call) -> None:
        assert self.owner is not None  # call() sends `self.x(...)` here only in a method
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
            RegionWalker(self.a, verdict, class_name, methods[first], top=False, seen=self.seen).run()
        elif first in members["modules"]:
            kind, detail = members["modules"][first]
            self.call_member(f"{spelled}.{first}", kind, detail, parts[1:], node)
        elif first in members["tensors"]:
            if first in members["buffers"] and len(parts) == 2 and in_place(parts[1]):
                verdict.add(verdict.mutations, f"`{text}()` ({self.where(node)}) mutates the buffer `{first}` in place")
        elif len(parts) <= 1:
            verdict.add(
                verdict.unseen, f"`{class_name}.{first}` ({self.where(node)}) is inherited: the analysis cannot see it"
            )
        else:
            verdict.add(verdict.unseen, f"calls `{text}(...)` ({self.where(node)}), which the analysis cannot follow")

    def call_member(self, spelled: str, kind: str, detail: Any, rest: list[str], node: ast.Call) -> None:
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
        elif kind == "dict":
            if rest and rest[0] in detail:
                sub_kind, sub_detail = detail[rest[0]]
                self.call_member(f"{spelled}.{rest[0]}", sub_kind, sub_detail, rest[1:], node)
            else:
                verdict.add(verdict.unseen, f"calls `{spelled}` ({self.where(node)}), which the analysis cannot follow")
        elif kind == "unknown":
            verdict.add(
                verdict.unseen,
                f"calls `{spelled}` ({self.where(node)}), set to `{detail}`, which the analysis cannot follow",
            )

    # -- values -----------------------------------------------------------------------
    def branch(self, test: ast.expr, node: ast.expr | ast.stmt) -> None:
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
                name = dotted(node.func)
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
        attr = self_attr(target)
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


def _maybe_tensor(source: SourceFile, param: ast.arg, default: ast.expr | None) -> bool:
    annotation = param.annotation
    if annotation is not None:
        # A parenthesized annotation, `(int | None)`, was never matched whole (its text kept the
        # parentheses); ast's extent leaves them out.
        before = source.lines[annotation.lineno - 1][: source.char_column(annotation.lineno, annotation.col_offset)]
        matched = not before.rstrip().endswith("(") and _NON_TENSOR_ANNOTATIONS.match(
            source.segment(annotation).strip()
        )
        if matched or dotted(annotation) in ("int", "float", "bool", "str"):
            return False
    if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
        return False
    return True


def binding_lines(analysis: Analysis, func: Def) -> dict[str, list[int]]:
    """Lines where each name is (re)bound in the function: assignments, loops, with-as."""
    bound: dict[str, list[int]] = {}

    def names(target: ast.expr) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            return [n for e in target.elts for n in names(e)]
        if isinstance(target, ast.Starred):
            return names(target.value)
        return []

    for node in analysis.tree.walk_body(func.body, skip_defs=True):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, line = node.targets, node.lineno
        elif isinstance(node, (ast.AnnAssign, *FORS, ast.NamedExpr)):
            targets, line = [node.target], node.lineno
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            # A with item has no position of its own: its expression's.
            targets, line = [node.optional_vars], node.context_expr.lineno
        for target in targets:
            for name in names(target):
                bound.setdefault(name, []).append(line)
    return bound
