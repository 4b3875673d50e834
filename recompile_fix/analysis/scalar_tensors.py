"""What the scalar analysis (``scalar_uses``) takes for a tensor in a function: a name assigned a
tensor expression, a parameter annotated ``Tensor`` or known from the Profile, ``self.X``
assigned one or registered as a buffer or parameter, and what torch functions, tensor methods
and modules called on a tensor give. Also the tensors a value meets, as the first function the
value was followed from names them (``Scope.outer_name``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.analysis.cst_names import target_names
from recompile_fix.analysis.cst_walk import children, is_name, walk
from recompile_fix.analysis.output_fields import is_output_field
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.torch_vocabulary import (
    CONVERTERS,
    NOT_TENSOR_METHODS,
    NOT_TENSOR_TORCH,
    PYTHON_REDUCERS,
    SAME_DTYPE_ELEMENTWISE,
    TENSOR_ATTRIBUTES,
)

__all__ = ["Scope", "TensorInference"]


@dataclass
class Scope:
    """A function (or module) the value flows through, and what is known to be a tensor there."""

    source: SourceFile
    file: str  # as the Profile spells it
    node: cst.CSTNode  # FunctionDef or Module (a ClassDef while its tensor attributes are found)
    tensors: set[str] = field(default_factory=set)
    caller: tuple[Scope, cst.Call] | None = None  # when this is a helper the value was passed into
    # In a helper: its parameters -> the caller's argument text, so ``meets`` names what the
    # first function sees (``x``), not the helper's own name for it.
    aliases: dict[str, str] = field(default_factory=dict)
    _tensor_attrs: set[str] | None = None

    def outer_name(self, code: str) -> str:
        if self.caller is None:
            return code
        assert isinstance(self.node, cst.FunctionDef)  # a helper the value was passed into
        return self.aliases.get(code, f"{self.node.name.value}:{code}")


class TensorInference:
    """Which expressions of a scope are tensors. With ``output_fields``, the fields of a module's
    output count too (``unet(x, t).sample``), and those taken are listed: a guess from the text
    (output_fields.py)."""

    def __init__(self, output_fields: bool = False):
        self.output_fields = output_fields
        self.fields_taken: list[str] = []
        self._module_cache: dict[int, tuple[SourceFile, set[str]]] = {}

    def tensorish(self, expr: cst.CSTNode, scope: Scope) -> bool:
        source = scope.source
        if isinstance(expr, cst.Name):
            return expr.value in scope.tensors
        if isinstance(expr, cst.Attribute):
            if is_name(expr.value, "self") and expr.attr.value in self._tensor_attributes(scope):
                return True
            if expr.attr.value in TENSOR_ATTRIBUTES:
                return self.tensorish(expr.value, scope)
            if self.output_fields and is_output_field(expr) and self.tensorish(expr.value, scope):
                self.fields_taken.append(source.code(expr))  # a guess: the rule says so (output_fields)
                return True
            return False
        if isinstance(expr, cst.Subscript):
            return self.tensorish(expr.value, scope)
        if isinstance(expr, cst.BinaryOperation):
            return self.tensorish(expr.left, scope) or self.tensorish(expr.right, scope)
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not) and self.tensorish(expr.expression, scope)
        if isinstance(expr, cst.Comparison):
            return self.tensorish(expr.left, scope) or any(
                self.tensorish(c.comparator, scope) for c in expr.comparisons
            )
        if isinstance(expr, cst.IfExp):
            return self.tensorish(expr.body, scope) and self.tensorish(expr.orelse, scope)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and self.tensorish(func.value, scope):
                return func.attr.value not in NOT_TENSOR_METHODS
            qualified = source.qualified_name(func)
            if qualified.startswith("torch."):
                last = qualified.rsplit(".", 1)[1]
                if last[:1].isupper():
                    return last in ("Tensor", "Parameter")
                return last not in NOT_TENSOR_TORCH and not qualified.startswith(
                    ("torch.optim.", "torch._dynamo.", "torch.compiler.")
                )
            if (
                qualified in CONVERTERS
                or qualified in PYTHON_REDUCERS
                or qualified.startswith(("math.", "numpy.", "random."))
            ):
                return False
            if isinstance(func, cst.Attribute) and func.attr.value in NOT_TENSOR_METHODS:
                return False
            # A module or helper called on a tensor gives a tensor (``self.fc(x)``, ``block(h)``);
            # a model called by keyword (``self.vit(pixel_values=x).logits``) or with a batch
            # (``model(**batch).loss``) only as the guess ``output_fields`` makes, whose fix a run
            # proves.
            return any(
                self.tensorish(a.value, scope) or (self.output_fields and a.star == "**")
                for a in expr.args
                if not a.keyword or self.output_fields
            )
        return False

    def _tensor_names(self, scope: Scope, seeds: set[str]) -> set[str]:
        names = set(seeds)
        scope.tensors = names
        if isinstance(scope.node, cst.FunctionDef):
            # The module's tensors the function reads as globals (`COS = emb.cos()` above a
            # rotary helper): those it binds itself are its own.
            names |= self._module_tensors(scope) - _bound_in(scope.node)
        assigns: list[tuple[list[cst.BaseExpression], cst.BaseExpression]] = []
        for node in walk(scope.node):
            if isinstance(node, cst.Assign):
                assigns.append(([t.target for t in node.targets], node.value))
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None:
                assigns.append(([node.target], node.value))
        self._grow(names, assigns, scope)
        return names

    def _grow(self, names: set[str], assigns: list, scope: Scope) -> None:
        changed = True
        while changed:
            changed = False
            for targets, value in assigns:
                for target in targets:
                    found: list[str] = []
                    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
                        if len(target.elements) != len(value.elements):
                            continue
                        for t, v in zip(target.elements, value.elements):  # `COS, SIN = e.cos(), e.sin()`
                            if isinstance(t.value, cst.Name) and self.tensorish(v.value, scope):
                                found.append(t.value.value)
                    elif self.tensorish(value, scope):
                        found = list(target_names(target))
                    for name in found:
                        if name not in names:
                            names.add(name)
                            changed = True

    def _module_tensors(self, scope: Scope) -> set[str]:
        """Names the module binds at its top level (outside functions and classes) to tensors."""
        cached = self._module_cache.get(id(scope.source))
        if cached is not None and cached[0] is scope.source:
            return cached[1]
        module = scope.source.module
        top = Scope(source=scope.source, file=scope.file, node=module)
        names: set[str] = set()
        top.tensors = names
        assigns: list = []
        pending: list[cst.CSTNode] = list(module.body)
        while pending:
            node = pending.pop()
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(node, cst.Assign):
                assigns.append(([t.target for t in node.targets], node.value))
            pending.extend(children(node))
        self._grow(names, assigns, top)
        self._module_cache[id(scope.source)] = (scope.source, names)
        return names

    def _tensor_attributes(self, scope: Scope) -> set[str]:
        """``self.X`` known to be tensors: assigned a tensor expression in any method of the
        class, or registered as a buffer or parameter."""
        if scope._tensor_attrs is not None:
            return scope._tensor_attrs
        scope._tensor_attrs = set()
        cls = scope.source.enclosing_class(scope.node) if isinstance(scope.node, cst.FunctionDef) else None
        if cls is None:
            return scope._tensor_attrs
        empty = Scope(source=scope.source, file=scope.file, node=cls, _tensor_attrs=set())
        found: set[str] = set()
        for node in walk(cls):
            if isinstance(node, cst.Assign) and self.tensorish(node.value, empty):
                for target in node.targets:
                    if isinstance(target.target, cst.Attribute) and is_name(target.target.value, "self"):
                        found.add(target.target.attr.value)
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("register_buffer", "register_parameter")
                and node.args
                and isinstance(node.args[0].value, cst.SimpleString)
            ):
                name = node.args[0].value.evaluated_value
                if isinstance(name, str):  # a bytes name is no attribute's
                    found.add(name)
        scope._tensor_attrs = found
        return found

    def _roots(self, expr: cst.BaseExpression, scope: Scope) -> list[str]:
        """The tensors an elementwise expression takes its dtype and rank from (``x * (c * c)``
        -> ``x``); any other expression stands for itself (``self.fc(x)``)."""
        if isinstance(expr, cst.BinaryOperation):
            return [
                r for side in (expr.left, expr.right) if self.tensorish(side, scope) for r in self._roots(side, scope)
            ]
        if isinstance(expr, cst.UnaryOperation):
            return self._roots(expr.expression, scope)
        if isinstance(expr, cst.Subscript) and any(isinstance(e.slice, cst.Slice) for e in expr.slice):
            return self._roots(expr.value, scope)  # `logits[:, -1, :]`: a slice keeps a dim and the dtype
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            name = expr.func.attr.value  # `x.sin()`, `torch.sin(x)`: the dtype and shape of `x`
            if any(a.keyword is not None and a.keyword.value in ("dtype", "out") for a in expr.args):
                return [scope.source.code(expr)]  # `x.softmax(-1, dtype=torch.float32)`: a dtype of its own
            if name in SAME_DTYPE_ELEMENTWISE and scope.source.qualified_name(expr.func) == f"torch.{name}":
                first = next((a.value for a in expr.args if a.keyword is None), None)
                if first is not None and self.tensorish(first, scope):
                    return self._roots(first, scope)
            elif name in SAME_DTYPE_ELEMENTWISE and self.tensorish(expr.func.value, scope):
                return self._roots(expr.func.value, scope)
        return [scope.source.code(expr)]


def _bound_in(func: cst.FunctionDef) -> set[str]:
    """The names a function binds itself: its parameters and what it assigns (not `global` ones)."""
    params = func.params
    bound = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            bound.add(star.name.value)
    declared: set[str] = set()
    for node in walk(func.body):
        if isinstance(node, cst.Global):
            declared |= {n.name.value for n in node.names}
        elif isinstance(node, cst.Assign):
            bound |= {n for t in node.targets for n in target_names(t.target)}
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
            bound |= set(target_names(node.target))
    return bound - declared
