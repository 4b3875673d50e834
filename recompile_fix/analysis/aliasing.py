"""What a block's outputs may alias, as torch's higher-order ops check it inside a compiled
region (``nested_compile_region`` traces the block as an ``invoke_subgraph`` HOP, and a HOP
rejects aliasing even in inference; measured on torch 2.13 with transformers 5.24 and diffusers
0.42):

* an output that is an input, or a view of one, passed back (T5's ``position_bias``, returned
  by the attention layer it was handed to: ``Input-to-output aliasing``);
* two outputs that are views of one tensor (Flux's single block returns
  ``h[:, :n], h[:, n:]``: ``Output-to-output aliasing``), where returning the same tensor twice
  is fine;
* a view of a tensor stored on an object that outlives the region (``self.last = h.detach()``:
  ``An intermediate tensor ... aliases an input or output``).

A small flow analysis over one function's ``ast``: each name holds the set of tensors it may be
(parameters by name, values made in the function by a token), views marked as such. A call to
a method, submodule or function of the same file maps through that callee's own summary (which
of its parameters it may return, per tuple position). A binding under a branch or a loop adds
to what a name may hold instead of replacing it. Unknown calls return fresh tensors: what the
analysis cannot see, region_check already reports as a risk.
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from recompile_fix.analysis.ast_tree import FORS, Def, arguments, code_of, dotted, in_place, parameters, self_attr

if TYPE_CHECKING:
    from recompile_fix.analysis.block_stacks import Analysis

__all__ = ["AliasFlow", "Aliases", "VIEW_METHODS"]

# Methods whose result may be (a view of) the tensor they are called on: views, and the
# conversions that return the tensor itself when there is nothing to convert.
VIEW_METHODS = {
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
    "tensor_split",
    "split_with_sizes",
    "contiguous",
    "to",
    "type",
    "type_as",
    "float",
    "half",
    "double",
    "bfloat16",
    "cpu",
    "cuda",
    "requires_grad_",
}

# A shape is a frozenset of tokens (one value) or a tuple of shapes (a tuple of values).
# Tokens: "p:<name>" a parameter, "v:<name>@<line>" a value the function made, "a:<code>" a
# tensor reached through an attribute of something else; a trailing "*" marks a view.
Shape = Union[frozenset, tuple]
_EMPTY: frozenset = frozenset()


def _flat(shape: Shape) -> frozenset:
    if isinstance(shape, frozenset):
        return shape
    out: set[str] = set()
    for element in shape:
        out |= _flat(element)
    return frozenset(out)


def _union(a: Shape, b: Shape) -> Shape:
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_union(x, y) for x, y in zip(a, b))
    return _flat(a) | _flat(b)


def _viewed(shape: Shape) -> frozenset:
    return frozenset(t if t.endswith("*") else t + "*" for t in _flat(shape))


def _base(token: str) -> str:
    return token.rstrip("*")


@dataclass
class _Summary:
    """What a function may return, per tuple position: the parameters each may be (views too)."""

    returns: Shape = _EMPTY
    stores: list[str] = field(default_factory=list)  # views stored on objects (hard errors)


class Aliases:
    """Summaries of the functions of one file, computed once each."""

    def __init__(self, analysis: Analysis):
        # Held weakly: the Analysis holds this (its ``aliases``), and a cycle would keep the file's
        # whole syntax tree alive until the cycle collector finds it (a static scan's every file).
        self.a: Analysis = weakref.proxy(analysis)
        self._summaries: dict[int, _Summary] = {}
        self._running: set[int] = set()

    def summary(self, owner: str | None, func: ast.FunctionDef, modules: dict[str, str] | None = None) -> _Summary:
        key = id(func)
        if key in self._summaries:
            return self._summaries[key]
        if key in self._running or len(self._running) > 8:
            return _Summary()  # recursion, or too deep: say nothing
        self._running.add(key)
        try:
            flow = AliasFlow(self, owner, func, modules)
            flow.run()
            kept = _Summary(
                returns=_only_parameters(flow.returned(), {f"p:{p}" for p in flow.params}), stores=flow.stores
            )
        finally:
            self._running.discard(key)
        self._summaries[key] = kept
        return kept


def _only_parameters(shape: Shape, params: set[str]) -> Shape:
    if isinstance(shape, tuple):
        return tuple(_only_parameters(e, params) for e in shape)
    return frozenset(t for t in shape if _base(t) in params)


class AliasFlow:
    """The flow through one function: what each name may be, what each ``return`` returns."""

    def __init__(self, aliases: Aliases, owner: str | None, func: Def, modules: dict[str, str] | None = None):
        self.aliases, self.a, self.owner, self.func = aliases, aliases.a, owner, func
        self.modules = modules or {}  # parameters that hold a block (a per-layer function's)
        every = [p.arg for p, _ in parameters(func.args)]
        if owner is not None and every and every[0] == "self":
            every = every[1:]
        self.params = [p for p in every if p not in self.modules]
        self.env: dict[str, Shape] = {p: frozenset({f"p:{p}"}) for p in self.params}
        self.returns: list[tuple[ast.Return, Shape]] = []
        self.stores: list[str] = []
        self.via: dict[str, str] = {}  # parameter token -> the call it came back through

    def run(self) -> None:
        self.block(self.func.body, conditional=False)

    def returned(self) -> Shape:
        shape: Shape | None = None
        for _, value in self.returns:
            shape = value if shape is None else _union(shape, value)
        return _EMPTY if shape is None else shape

    # -- statements -----------------------------------------------------------------------
    def block(self, body: list[ast.stmt], conditional: bool) -> None:
        for statement in body:
            self.statement(statement, conditional)

    def statement(self, node: ast.stmt, conditional: bool) -> None:
        if isinstance(node, ast.Assign):
            value = self.eval(node.value)
            for target in node.targets:
                self.bind(target, value, conditional, node)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self.bind(node.target, self.eval(node.value), conditional, node)
        elif isinstance(node, ast.Return):
            self.returns.append((node, self.eval(node.value) if node.value is not None else _EMPTY))
        elif isinstance(node, ast.If):
            self.eval(node.test)
            self.block(node.body, True)
            self.block(node.orelse, True)
        elif isinstance(node, (*FORS, ast.While)):
            if isinstance(node, FORS):
                self.bind(node.target, _viewed(self.eval(node.iter)), True, node)
            self.block(node.body, True)
            self.block(node.orelse, True)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.eval(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, _EMPTY, conditional, node)
            self.block(node.body, conditional)
        elif isinstance(node, ast.Try):
            self.block(node.body, True)
            for handler in node.handlers:
                self.block(handler.body, True)
            self.block(node.orelse, True)
            self.block(node.finalbody, conditional)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                self.block(case.body, True)
        elif isinstance(node, ast.Expr):
            self.eval(node.value)

    def bind(self, target: ast.expr, value: Shape, conditional: bool, node: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if value == _EMPTY:  # a value made here: a token of its own, so views of it can be told
                value = frozenset({f"v:{target.id}@{node.lineno}"})
            if conditional and target.id in self.env:
                value = _union(self.env[target.id], value)
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            if (
                isinstance(value, tuple)
                and len(value) == len(elements)
                and not any(isinstance(e, ast.Starred) for e in elements)
            ):
                for element, part in zip(elements, value):
                    self.bind(element, part, conditional, node)
            else:
                for element in elements:
                    inner = element.value if isinstance(element, ast.Starred) else element
                    self.bind(inner, _flat(value), conditional, node)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, _flat(value), conditional, node)
        elif isinstance(target, ast.Attribute) and any(t.endswith("*") for t in _flat(value)):
            # A view stored on an object (self or one passed in) that outlives the region.
            where = code_of(self.a.source, target)
            self.stores.append(
                f"stores a view of a tensor on `{where}` (line {node.lineno}): an intermediate tensor that "
                'aliases an input or output cannot leave a compiled region (torch: "An intermediate tensor '
                '... aliases an input or output"); store a copy (`.clone()`)'
            )

    # -- expressions ----------------------------------------------------------------------
    def eval(self, node: ast.expr | None) -> Shape:
        if node is None:
            return _EMPTY
        if isinstance(node, ast.Name):
            return self.env.get(node.id, _EMPTY)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.eval(e.value if isinstance(e, ast.Starred) else e) for e in node.elts)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.IfExp):
            self.eval(node.test)
            return _union(self.eval(node.body), self.eval(node.orelse))
        if isinstance(node, ast.BoolOp):
            shape: Shape = _EMPTY
            for operand in node.values:
                shape = _union(shape, self.eval(operand)) if shape != _EMPTY else self.eval(operand)
            return shape
        if isinstance(node, ast.NamedExpr):
            named = self.eval(node.value)
            self.bind(node.target, named, True, node)  # type: ignore[arg-type]
            return named
        for child in ast.iter_child_nodes(node):  # arithmetic and the like: fresh values
            if isinstance(child, ast.expr):
                self.eval(child)
        return _EMPTY

    def subscript(self, node: ast.Subscript) -> Shape:
        value = self.eval(node.value)
        index = node.slice
        if isinstance(value, tuple):
            if (
                isinstance(index, ast.Constant)
                and isinstance(index.value, int)
                and -len(value) <= index.value < len(value)
            ):
                return value[index.value]
            if isinstance(index, ast.Slice):
                return _flat(value)
            return _flat(value)
        self.eval(index)
        return _viewed(value or self._made(node.value))  # indexing a tensor: a view

    def _made(self, node: ast.expr) -> Shape:
        """What ``node`` may be; a value made right there (``self.fc(x)`` in ``self.fc(x).chunk(2)``)
        gets a token of its own, so the views taken of it are known to share it."""
        value = self.eval(node)
        return value if value != _EMPTY else frozenset({f"v:@{node.lineno}:{node.col_offset}"})

    def attribute(self, node: ast.Attribute) -> Shape:
        if node.attr in ("T", "mT", "H", "mH", "data", "real", "imag"):
            return _viewed(self.eval(node.value))
        attr = self_attr(node)
        if attr is not None and self.owner is not None and attr in self.a.members(self.owner)["tensors"]:
            return frozenset({f"s:{attr}"})
        if attr is None and isinstance(node.value, (ast.Name, ast.Attribute)) and dotted(node):
            base = dotted(node).split(".")[0]
            if base in self.env or base not in ("self",):
                return frozenset({f"a:{dotted(node)}"})
        return _EMPTY

    def call(self, node: ast.Call) -> Shape:
        func = node.func
        for _, value, _ in arguments(node):
            self.eval(value)
        if isinstance(func, ast.Attribute) and (func.attr in VIEW_METHODS or in_place(func.attr)):
            base = func.value
            if not (isinstance(base, ast.Name) and base.id in self.a.torch_names):
                shape = _viewed(self._made(base))
                # In place (x.add_(1)) returns the tensor itself, not a view.
                return (
                    frozenset(_base(t) for t in shape)
                    if in_place(func.attr) and func.attr != "requires_grad_"
                    else shape
                )
        callee = self.callee(node)
        if callee is not None:
            owner, target, modules, skip_self = callee
            summary = self.aliases.summary(owner, target, modules)
            return self.through(summary.returns, target, node, skip_self)
        if isinstance(func, ast.Name) and func.id in ("tuple", "list") and node.args:
            return _flat(self.eval(node.args[0]))
        return _EMPTY

    def callee(self, node: ast.Call) -> tuple[str | None, Any, dict[str, str] | None, bool] | None:
        """The function of this file a call runs: (its class, its def, module parameters, whether
        its first parameter is the instance)."""
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in self.modules:
                return self._forward_of(self.modules[func.id])
            function = self.a.functions.get(func.id)
            return (None, function, None, False) if function is not None else None
        if self.owner is None:
            return None
        chain = func
        index: int | None = None
        if isinstance(chain, ast.Subscript):  # self.layer[0](...)
            if isinstance(chain.slice, ast.Constant) and isinstance(chain.slice.value, int):
                index = chain.slice.value
            else:
                return None
            chain = chain.value
        name = dotted(chain)
        if not name.startswith("self."):
            return None
        parts = name.split(".")[1:]
        methods = self.a.all_methods(self.owner)
        if index is None and len(parts) == 1 and parts[0] in methods:
            return (self.owner, methods[parts[0]], None, True)
        members = self.a.members(self.owner)
        path = ".".join(parts)
        if index is not None and path in members["containers"]:
            order = members["ordered"].get(path) or []
            known = order[: index + 1] if index >= 0 else []
            block = known[index] if len(known) == index + 1 and None not in known else None
            if block is not None and block in self.a.classes:
                return self._forward_of(block)
            return None
        if index is None and len(parts) == 1 and parts[0] in members["modules"]:
            kind, detail = members["modules"][parts[0]]
            if kind == "class":
                return self._forward_of(detail)
        return None

    def _forward_of(self, class_name: str):
        forward = self.a.all_methods(class_name).get("forward")
        return (class_name, forward, None, True) if forward is not None else None

    def through(self, returns: Shape, target: ast.FunctionDef, node: ast.Call, skip_self: bool) -> Shape:
        """The callee's return shape in the caller's terms: its parameters replaced by the
        arguments this call passes them."""
        names = [p.arg for p, _ in parameters(target.args)]
        if skip_self and names:
            names = names[1:]
        passed: dict[str, ast.expr] = {}
        positional = 0
        for keyword, value, star in arguments(node):
            if star:
                continue
            if keyword is None:
                if positional < len(names):
                    passed[names[positional]] = value
                positional += 1
            else:
                passed[keyword] = value
        call_text = code_of(self.a.source, node.func)

        def mapped(shape: Shape) -> Shape:
            if isinstance(shape, tuple):
                return tuple(mapped(e) for e in shape)
            out: set[str] = set()
            for token in shape:
                name = _base(token)[2:]
                if name in passed:
                    value = self.eval(passed[name])
                    flat = _viewed(value) if token.endswith("*") else _flat(value)
                    out |= flat
                    for t in flat:
                        self.via.setdefault(_base(t), f"`{call_text}(...)` at line {node.lineno}")
            return frozenset(out)

        return mapped(returns)


def check_outputs(flow: AliasFlow, tensors: set[str]) -> list[str]:
    """The aliasing a HOP rejects in what ``flow``'s function returns (messages, one per kind)."""
    problems: list[str] = []
    for node, shape in flow.returns:
        leaves = _leaves(shape, node.value)
        for _, tokens in leaves:
            for token in sorted(tokens):
                base = _base(token)
                what = None
                if base.startswith("p:") and base[2:] in tensors:
                    kind = "a view of its input" if token.endswith("*") else "its input"
                    via = flow.via.get(base)
                    what = f"{kind} `{base[2:]}` (line {node.lineno}" + (f"; passed back by {via})" if via else ")")
                elif base.startswith("s:"):
                    what = f"its own tensor `self.{base[2:]}` (line {node.lineno})"
                if what:
                    problems.append(
                        f"returns {what}: the region cannot return an alias of an input "
                        '("Higher order ops do not support aliasing"); return a copy (`.clone()`)'
                    )
        for i, (first, a) in enumerate(leaves):
            for second, b in leaves[i + 1 :]:
                shared = {_base(t) for t in a} & {_base(t) for t in b}
                shared = {t for t in shared if not t.startswith(("p:", "s:"))}
                same_object = (
                    isinstance(first, ast.Name)
                    and isinstance(second, ast.Name)
                    and first.id == second.id
                    or not any(t.endswith("*") for t in a | b)
                )
                if shared and not same_object:
                    problems.append(
                        f"returns two views of one tensor (line {node.lineno}: "
                        f"`{_text(flow, first)}` and `{_text(flow, second)}`): outputs of the region cannot "
                        'alias each other ("Output-to-output aliasing"); return copies (`.clone()`)'
                    )
    return list(dict.fromkeys(problems))


def _text(flow: AliasFlow, node: ast.expr | None) -> str:
    return code_of(flow.a.source, node) if node is not None else "?"


def _leaves(shape: Shape, node: ast.expr | None) -> list[tuple[ast.expr | None, frozenset]]:
    """The values a return statement returns, with the expression of each where it is written
    out (``return a, (b, c)``: a, b, c)."""
    if isinstance(shape, tuple):
        elements = node.elts if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == len(shape) else None
        out = []
        for i, part in enumerate(shape):
            out.extend(_leaves(part, elements[i] if elements else None))
        return out
    return [(node, shape)]
