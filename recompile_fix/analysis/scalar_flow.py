"""Where a Python number's value goes inside the source, for the scalar analysis
(``scalar_uses``): ``ValueFlow`` follows it with libcst through Python arithmetic (``c * 2``),
conditional expressions, locals it is assigned to, lists summed or read back by constant index,
``return`` into the caller, and into the functions it is passed to when their source is readable
(same file, a method or submodule of the same class, or a file imported from next to it), and
records a ``Use`` at each place it ends up. What a call it is passed to does with it (``range()``,
a torch function, a tensor method) is the verdict ``ScalarUses`` gives (scalar_uses.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Set
from dataclasses import dataclass, replace
from typing import TypeAlias

import libcst as cst

from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.cst_names import (
    annotated_tensors,
    function_named,
    name_loads,
    number_literal,
    one_line,
    parameter_for,
    submodule_class,
    submodule_constructor,
)
from recompile_fix.analysis.cst_walk import is_name
from recompile_fix.analysis.scalar_tensors import Scope, TensorInference
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.torch_vocabulary import EXACT_INT_OPS, TENSOR_DATA_CALLS
from recompile_fix.analysis.type_tests import loads_past_device_moves

__all__ = ["BLOCKS", "Callee", "FlowPath", "TENSOR", "UNKNOWN", "Use", "ValueFlow"]

# A Use's verdict: the value meets a tensor in arithmetic; a tensor breaks or changes the use; the
# source there cannot be read.
TENSOR = "tensor"


BLOCKS = "blocks"


UNKNOWN = "unknown"


@dataclass(frozen=True)
class Use:
    """One place a value ends up."""

    verdict: str  # TENSOR / BLOCKS / UNKNOWN
    kind: str  # arith, branch, compare, range, convert, math, shape, setting, dropout, index, ...
    why: str  # plain words: "reaches `range()`"
    file: str
    line: int
    code: str  # the source line, stripped
    meets: tuple[str, ...] = ()  # the tensor expressions it meets
    scalar_math: bool = False  # Python-number arithmetic ran before it met a tensor
    int_exact: bool = True  # ... and that arithmetic is exact in int64 (+ - * // % with ints)
    scalar_slot: bool = False  # it fills a Scalar argument: the tensor's dtype never reaches the result
    float64_only: bool = False  # torch takes a float64 0-d tensor there, not a float32 one
    exact: bool = True  # a 0-d tensor there computes bit-identically (False: only close)
    effect: str = ""  # what a 0-d tensor does at this use, when it is known for this use alone
    op: str = ""  # the call it is an argument of (`arange`, `view`), where it is one

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        return f"{self.why} at {self.where} (`{self.code}`)"


@dataclass(frozen=True)
class FlowPath:
    """How the value got here: Python arithmetic on the way, and the helpers and locals followed."""

    scalar_math: bool = False
    int_exact: bool = True
    depth: int = 0
    visited: frozenset[tuple[str, int, str]] = frozenset()  # (file, id(scope node), name) followed
    # Arithmetic on the way met an operand the analysis could not type (`a * (b - c)`).
    unknown_operand: bool = False

    def after(self, operator: cst.BaseBinaryOp, other: cst.BaseExpression) -> FlowPath:
        exact = (
            self.int_exact
            and type(operator).__name__ in EXACT_INT_OPS
            and not isinstance(other, (cst.Float, cst.Imaginary))
        )
        literal = isinstance(other, (cst.Integer, cst.Float, cst.Imaginary))
        return replace(self, scalar_math=True, int_exact=exact, unknown_operand=self.unknown_operand or not literal)


# A function whose source can be read: its file's source, the file as the Profile spells it, its
# def, and whether it binds ``self`` (a method called on an instance).
Callee: TypeAlias = "tuple[SourceFile, str, cst.FunctionDef, bool]"


class ValueFlow(TensorInference):
    """Follows a value to the places it ends up; ``_call`` (``ScalarUses``) says what a call it is
    passed to does with it. ``read(file)`` gives another file of the project (as the Profile
    spells paths) when a value is passed into a function defined there."""

    def __init__(
        self,
        read: Callable[[str], SourceFile | None] | None = None,
        max_depth: int = 3,
        classes: ClassIndex | None = None,
        output_fields: bool = False,
    ):
        super().__init__(output_fields)
        self.read: Callable[[str], SourceFile | None] = read or (lambda file: None)
        self.max_depth = max_depth
        # Methods and submodules of classes whose bases or classes live in other project files.
        self.classes = classes
        # Where a followed value was tested against None (``if c is not None:``): an optional.
        self.none_tests: list[str] = []
        # Where a tensor would only be moved to a device (``if torch.is_tensor(c): c = c.to(...)``).
        self.device_moves: list[str] = []

    def _loads(self, source: SourceFile, file: str, scope: cst.CSTNode, name: str) -> list[cst.Name]:
        """The reads of ``name`` that decide something: not those of a device move (type_tests)."""
        loads, moves = loads_past_device_moves(source, scope, name)
        self.device_moves.extend(f"{file}:{line}" for line in moves)
        return loads

    # -- entry points --------------------------------------------------------------------------
    def of_parameter(
        self, source: SourceFile, file: str, func: cst.FunctionDef, param: str, tensors: Set[str] = frozenset()
    ) -> list[Use]:
        """Every use of parameter ``param`` inside ``func`` (``tensors``: the parameters known
        to be tensors, e.g. from the Profile's recorded inputs)."""
        scope = self.scope(source, file, func, tensors)
        uses: list[Use] = []
        for name in self._loads(source, file, func, param):
            uses.extend(self.classify(name, scope, FlowPath(visited=frozenset({(file, id(func), param)}))))
        return uses

    def of_expression(self, node: cst.BaseExpression, scope: Scope) -> list[Use]:
        """Where the value of one expression (``self.num_iter``, a global's name) ends up."""
        return self.classify(node, scope, FlowPath())

    def scope(self, source: SourceFile, file: str, node: cst.CSTNode, seeds: Set[str] = frozenset()) -> Scope:
        scope = Scope(source=source, file=file, node=node)
        scope.tensors = self._tensor_names(scope, set(seeds) | annotated_tensors(node))
        return scope

    # -- following a value ---------------------------------------------------------------------
    def classify(self, expr: cst.BaseExpression, scope: Scope, path: FlowPath) -> list[Use]:
        source = scope.source
        node = expr
        while True:
            parent = source.parents.get(node)
            if isinstance(parent, cst.BinaryOperation):
                if isinstance(parent.operator, cst.MatrixMultiply):
                    return [self._use("matmul", "is an operand of `@`", parent, scope, path)]
                other = parent.right if node is parent.left else parent.left
                if self.tensorish(other, scope):
                    # `x ** c`, and `c / x` (torch divides a number by a tensor as
                    # `reciprocal(x) * c`, a 0-d tensor by a true division): close, not identical.
                    exact = not isinstance(parent.operator, cst.Power) and not (
                        isinstance(parent.operator, cst.Divide) and node is parent.left
                    )
                    return [self._use("arith", "tensor arithmetic", parent, scope, path, meets=(other,), exact=exact)]
                path = path.after(parent.operator, other)
                node = parent
                continue
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, (cst.Minus, cst.Plus)):
                node = parent
                continue
            if isinstance(parent, cst.IfExp) and node is not parent.test:
                node = parent
                continue
            break
        return self._context(node, scope, path)

    def _context(self, node: cst.BaseExpression, scope: Scope, path: FlowPath) -> list[Use]:
        source = scope.source
        parent = source.parents.get(node)
        if isinstance(parent, cst.Arg):
            call = source.parents.get(parent)
            if isinstance(call, cst.Call):
                return self._call(call, parent, scope, path)
        if isinstance(parent, cst.ComparisonTarget):
            parent = source.parents.get(parent)
        if isinstance(parent, cst.Comparison):
            if _is_none_test(parent):
                # `if c is not None:` on an optional: a tensor is not None either, so the test
                # decides the same branch (the None calls stay None at the call site).
                self.none_tests.append(f"{scope.file}:{source.positions[parent].start.line}")
                return []
            if self.tensorish(parent, scope):
                others = [c.comparator for c in parent.comparisons] + [parent.left]
                meets = tuple(o for o in others if o is not node and self.tensorish(o, scope))
                return [self._use("arith", "tensor comparison", parent, scope, path, meets=meets)]
            branch = self._branch(parent, scope)
            if branch is not None:
                return [self._use("branch", "decides a Python branch", parent, scope, path)]
            # A comparison used as a number (`x * (c > 0)`) or in a tensor op (`torch.where(c > 0,
            # ...)`): a 0-d bool tensor does the same there; follow the result.
            return self.classify(parent, scope, replace(path, scalar_math=True))
        branch = self._branch(node, scope)
        if branch is not None:
            return [self._use("branch", "decides a Python branch", node, scope, path)]
        if isinstance(parent, (cst.Index, cst.Slice, cst.SubscriptElement)):
            indexed = next((a for a in source.ancestors(node) if isinstance(a, cst.Subscript)), None)
            if indexed is not None and not self.tensorish(indexed.value, scope):
                # A list, a ModuleList, a dict: Dynamo needs the index's value there (a dynamic
                # int fails in `self.layers[:n]`; a 0-d tensor graph-breaks).
                what = f"indexes or slices `{source.code(indexed.value)}`, not known to be a tensor"
                return [self._use("sequence_index", what, node, scope, path)]
            if isinstance(parent, cst.Slice):  # a slice's bound stays symbolic in a dynamic graph
                return [self._use("slice", "bounds a slice of a tensor", node, scope, path)]
            return [self._use("index", "is used as an index or slice", node, scope, path)]
        if isinstance(parent, cst.Return):
            if scope.caller is not None:
                caller_scope, call = scope.caller
                return self.classify(call, caller_scope, replace(path, depth=path.depth - 1))
            operands = [a for a in _operands(node) if not isinstance(a, (cst.Integer, cst.Float, cst.Imaginary))]
            if len(operands) > 1:  # `base + c * (a - b)`: what the others are is not known here
                what = (
                    f"is returned in `{one_line(source.code(node))}`, whose other operands are not known to be tensors"
                )
                return [self._use("return", what, node, scope, path)]
            if path.unknown_operand:  # `eps = a + c * (b - a)`, then `return eps`
                what = f"is returned in `{one_line(source.code(node))}`, computed with operands not known to be tensors"
                return [self._use("return", what, node, scope, path)]
            return [self._use("return", "is returned as a Python number", node, scope, path)]
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and node is parent.value:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if isinstance(parent, cst.AugAssign) and self.tensorish(parent.target, scope):
                return [self._use("arith", "tensor arithmetic", parent, scope, path, meets=(parent.target,))]
            if len(targets) == 1 and isinstance(targets[0], cst.Name):
                return self._local(targets[0].value, scope, path)
            return [self._use("store", f"is stored in `{source.code(targets[0])}`", node, scope, path)]
        if isinstance(parent, cst.Expr):
            return []  # computed and dropped
        if isinstance(parent, cst.Element):
            followed = self._container(parent, scope, path)
            if followed is not None:
                return followed
        if isinstance(parent, (cst.Element, cst.StarredElement)):
            return [
                self._use("store", f"is put in `{one_line(source.code(source.parents[parent]))}`", node, scope, path)
            ]
        if isinstance(parent, cst.DictElement):
            return [self._use("store", "is stored in a dict", node, scope, path)]
        if isinstance(parent, cst.FormattedStringExpression):
            if parent.conversion is None and not path.scalar_math:
                # `f"{margin:.2f}"`: a 0-d tensor formats as its value (`Tensor.__format__`), a
                # float64 one as the float did; in compiled code it is a graph break (`.item()`).
                return [self._use("format", "is formatted into a string", node, scope, path)]
            return [self._use("print", "is formatted into a string", node, scope, path)]
        return [self._use("unknown", f"is used in `{one_line(source.code(parent or node))}`", node, scope, path)]

    def _container(self, element: cst.Element, scope: Scope, path: FlowPath) -> list[Use] | None:
        """A list or tuple the value is put in, when it is only summed (``sum([c, 1.0])``) or
        stored in a local that is read back by constant index (``pair = [c, c]; x * pair[0]``):
        the value's uses there. None for any other container."""
        source = scope.source
        container = source.parents.get(element)
        if not isinstance(container, (cst.List, cst.Tuple)):
            return None
        holder = source.parents.get(container)
        if isinstance(holder, cst.Arg) and holder.keyword is None and not holder.star:
            call = source.parents.get(holder)
            if (
                isinstance(call, cst.Call)
                and source.qualified_name(call.func) in TENSOR_DATA_CALLS
                and call.args[0] is holder
                and isinstance(container, cst.List)
            ):
                # `torch.tensor([step])` (a StaticCache's position): traced from a symbolic int
                # once (torch 2.13 and 2.14, eager and inductor); a 0-d tensor's dtype would rule.
                what = f"is an element of the data `{source.code(call.func)}()` builds a tensor from"
                return [self._use("tensor_data", what, call, scope, path)]
            if isinstance(call, cst.Call) and source.qualified_name(call.func) == "sum" and len(call.args) == 1:
                floats = any(isinstance(e.value, (cst.Float, cst.Imaginary)) for e in container.elements)
                return self.classify(
                    call, scope, replace(path, scalar_math=True, int_exact=path.int_exact and not floats)
                )
            return None
        if (
            isinstance(holder, cst.Assign)
            and len(holder.targets) == 1
            and isinstance(holder.targets[0].target, cst.Name)
            and isinstance(scope.node, cst.FunctionDef)
        ):
            index = container.elements.index(element)
            uses: list[Use] = []
            for load in name_loads(source, scope.node, holder.targets[0].target.value):
                subscript = source.parents.get(load)
                if not isinstance(subscript, cst.Subscript) or (constant := _constant_index(subscript)) is None:
                    return None  # read as a whole (len(), iteration, passed on): it stays a list
                if constant == index:
                    uses.extend(self.classify(subscript, scope, path))
            return uses
        return None

    def _branch(self, node: cst.CSTNode, scope: Scope) -> cst.CSTNode | None:
        """The if/while/assert/conditional expression whose test this node decides, if any."""
        child = node
        for parent in scope.source.ancestors(node):
            if isinstance(parent, (cst.BooleanOperation,)) or (
                isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)
            ):
                child = parent
                continue
            if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.Assert)) and child is parent.test:
                return parent
            return None
        return None

    def _local(self, name: str, scope: Scope, path: FlowPath) -> list[Use]:
        key = (scope.file, id(scope.node), name)
        if key in path.visited:
            return []
        path = replace(path, visited=path.visited | {key})
        uses: list[Use] = []
        for load in self._loads(scope.source, scope.file, scope.node, name):
            uses.extend(self.classify(load, scope, path))
        return uses

    def _call(self, call: cst.Call, arg: cst.Arg, scope: Scope, path: FlowPath) -> list[Use]:
        """What ``call`` does with the value it is passed as ``arg``: ScalarUses's verdicts."""
        raise NotImplementedError

    def _into_callee(self, call: cst.Call, arg: cst.Arg, label: str, scope: Scope, path: FlowPath) -> list[Use]:
        """The value passed to a function of the project: its uses there, through the parameter
        ``arg`` binds (UNKNOWN where it cannot be followed: no source, too deep, or an argument
        the function does not name)."""
        source = scope.source
        target = self._callee(call, scope)
        if target is None:
            return [
                self._use("unknown", f"is passed to {label}, whose source recompile-fix cannot read", call, scope, path)
            ]
        if path.depth >= self.max_depth:
            return [self._use("unknown", f"is passed to {label}, deeper than recompile-fix follows", call, scope, path)]
        callee_source, callee_file, callee, bound = target
        params, param = parameter_for(callee, arg, call, bound)
        if param is None:
            return [self._use("unknown", f"is passed to {label} as an argument it does not name", call, scope, path)]
        seeds = {p for p, a in params.items() if a is not None and self.tensorish(a.value, scope)}
        inner = self.scope(callee_source, callee_file, callee, seeds)
        inner.caller = (scope, call)
        inner.aliases = {p: scope.outer_name(source.code(a.value)) for p, a in params.items() if a is not None}
        key = (callee_file, id(callee), param)
        if key in path.visited:
            return []
        inner_path = replace(path, depth=path.depth + 1, visited=path.visited | {key})
        uses: list[Use] = []
        for load in self._loads(callee_source, callee_file, callee, param):
            uses.extend(self.classify(load, inner, inner_path))
        return uses

    def _callee(self, call: cst.Call, scope: Scope) -> Callee | None:
        """(source, file, FunctionDef, binds_self) for a call whose target's source we can read."""
        source, func = scope.source, call.func
        if isinstance(func, cst.Name):
            local = function_named(source, source.module, func.value)
            if local is not None:
                return source, scope.file, local, False
            imported = source.imports.get(func.value)
            if imported and "." in imported:
                module, _, name = imported.rpartition(".")
                other_file = os.path.normpath(os.path.join(os.path.dirname(scope.file), *module.split("."))) + ".py"
                other = self.read(other_file)
                if other is not None:
                    found = function_named(other, other.module, name)
                    if found is not None:
                        return other, other_file, found, False
            return None
        if isinstance(func, cst.Attribute) and is_name(func.value, "self") and isinstance(scope.node, cst.FunctionDef):
            cls = source.enclosing_class(scope.node)
            if cls is None:
                return None
            method = function_named(source, cls.body, func.attr.value)
            if method is not None:
                return source, scope.file, method, True
            submodule = submodule_class(source, cls, func.attr.value)
            if submodule is not None:
                forward = function_named(source, submodule.body, "forward")
                if forward is not None:
                    return source, scope.file, forward, True
            if self.classes is not None:
                return self._callee_across_files(cls, func.attr.value, scope)
        return None

    def _callee_across_files(self, cls: cst.ClassDef, attr: str, scope: Scope) -> Callee | None:
        """``self.attr(...)``: a method inherited from a base in another file, or the forward of
        a submodule whose class is imported from another file."""
        assert self.classes is not None
        ref = ClassRef(scope.file, scope.source, cls)
        inherited = self.classes.method(ref, attr)
        if inherited is not None:
            owner, method = inherited
            return owner.source, owner.file, method, True
        for owner in self.classes.mro(ref):
            built = submodule_constructor(owner.node, attr)
            if built is None:
                continue
            target = self.classes.resolve(owner.file, built)
            found = self.classes.method(target, "forward") if target is not None else None
            if found is not None:
                return found[0].source, found[0].file, found[1], True
        return None

    def _use(
        self,
        kind: str,
        why: str,
        node: cst.CSTNode,
        scope: Scope,
        path: FlowPath,
        meets: tuple[cst.BaseExpression, ...] = (),
        *,
        exact: bool = True,
        slot: bool = False,
        float64_only: bool = False,
        effect: str = "",
    ) -> Use:
        source = scope.source
        line = source.positions[node].start.line
        code = source.lines[line - 1].strip() if line - 1 < len(source.lines) else ""
        verdict = TENSOR if kind == "arith" else UNKNOWN if kind == "unknown" else BLOCKS
        func = node.func if isinstance(node, cst.Call) else None
        op = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return Use(
            op=op,
            verdict=verdict,
            kind=kind,
            why=why,
            file=scope.file,
            line=line,
            code=code,
            meets=tuple(scope.outer_name(m) for node in meets for m in self._roots(node, scope)),
            scalar_math=path.scalar_math,
            int_exact=path.int_exact,
            scalar_slot=slot,
            float64_only=float64_only,
            exact=exact,
            effect=effect,
        )


def _is_none_test(comparison: cst.Comparison) -> bool:
    """``c is None`` / ``c is not None`` (either side)."""
    if len(comparison.comparisons) != 1:
        return False
    target = comparison.comparisons[0]
    return isinstance(target.operator, (cst.Is, cst.IsNot)) and (
        is_name(comparison.left, "None") or is_name(target.comparator, "None")
    )


def _constant_index(subscript: cst.Subscript) -> int | None:
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    value = number_literal(subscript.slice[0].slice.value)
    return value if isinstance(value, int) else None


def _operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an arithmetic expression, through its operators and parentheses."""
    if isinstance(expr, cst.BinaryOperation):
        return _operands(expr.left) + _operands(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _operands(expr.expression)
    return [expr]
