"""Can a block's ``forward`` be traced whole, as one compiled region? A walk of the function (and
what it calls in the same file) for what would break the graph, mutate state in training, or
return its input: RF004's ``Verdict``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recompile_fix.analysis.ast_tree import (
    FORS,
    code_of,
    dotted,
    in_place,
    parameters,
    self_attr,
    unstarred,
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


_NON_TENSOR_ANNOTATIONS = re.compile(r"^(int|float|bool|str|bytes)(\s*\|\s*None)?$|^Optional\[(int|float|bool|str)\]$")


class RegionWalker:
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
        every = parameters(func.args)
        if owner is not None and every and every[0][0].arg == "self":
            every = every[1:]
        self.tensors = {
            p.arg for p, default in every if _maybe_tensor(self.source, p, default) and p.arg not in self.modules
        }
        self.bound = binding_lines(analysis, func)

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
        name = dotted(func)
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

    def aliasing(self, value: ast.expr, node: ast.Return) -> None:
        values = [unstarred(e) for e in value.elts] if isinstance(value, ast.Tuple) else [value]
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
            elif self_attr(base) in self.a.members(self.owner or "")["tensors"]:
                alias = f"its own tensor `{code_of(self.source, base)}`"
            if alias:
                self.verdict.add(
                    self.verdict.hard,
                    f"returns {alias} ({self.where(node)}): the region cannot "
                    'return an alias of an input ("Higher order ops do not '
                    'support aliasing"); return a copy (`.clone()`)',
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


def binding_lines(analysis: Analysis, func: ast.FunctionDef) -> dict[str, list[int]]:
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
        elif isinstance(node, (ast.AnnAssign, *FORS, ast.NamedExpr)):
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
