"""Would a Python number still do the same thing as a 0-d tensor? The question the rules that
wrap constants in tensors (RF002, RF003, RF006) ask of the source before they edit it.

A 0-d tensor computes the same as a Python number in tensor arithmetic (``x * c``,
``torch.clamp(x, max=c)``), but not where Python or torch needs the number itself: ``range(c)``,
``if c == 0``, ``math.sqrt(c)``, a dropout probability, an ``eps``, a shape. Those fail to
compile or silently change the graph (torch-2.13-recompile-facts.md §8).

``ScalarUses`` follows a value through one function with libcst: through Python arithmetic
(``c * 2``), into locals it is assigned to, and into the functions it is passed to when their
source is readable (same file, a method or submodule of the same class, or a file imported from
next to it), and classifies every place it ends up:

* ``TENSOR``: it meets a tensor in arithmetic (the rest of the expression was a tensor already);
* ``BLOCKS``: a use a tensor breaks or changes; ``why`` says which;
* ``UNKNOWN``: passed where the source cannot be read (a library function).

Each Use also records whether Python-number arithmetic ran before the value met a tensor
(``scalar_math``) and whether that arithmetic stays exact for an int64 tensor (``int_exact``:
only ``+ - * // %`` with ints), so a rule can pick the tensor dtype that keeps results identical;
whether the value fills a Scalar argument (``scalar_slot``: its dtype never reaches the result),
whether torch takes it only as a float64 tensor there (``float64_only``), and whether a tensor
there computes only close to the number (``exact``).

The verdicts follow what torch 2.13 does with a 0-d tensor, measured construct by construct
(tests/test_construct_table.py), not caution: Python's ``max``/``min`` with a constant, ``abs``,
``sum([...])``, a comparison used as a number or inside a tensor op, ``is None`` on an optional,
a list it is stored in and read back from by constant index all pass the value on; ``round``,
``float()``, ``int()``, builtin ``pow``, branches, ``range`` and ``math.*`` block it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Callable

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
    target_names,
)
from recompile_fix.analysis.output_fields import is_output_field
from recompile_fix.analysis.source import SourceFile, is_name, walk
from recompile_fix.analysis.torch_vocabulary import (
    ARITH_FUNCTIONS,
    ARITH_METHODS,
    CONVERTER_WHY,
    CONVERTERS,
    EXACT_INT_OPS,
    INEXACT,
    NOT_TENSOR_METHODS,
    NOT_TENSOR_TORCH,
    NOT_VALUE_KEYWORDS,
    NUMBER_SETTING_FUNCTIONS,
    PYTHON_REDUCERS,
    SAME_DTYPE_ELEMENTWISE,
    SCALAR_SLOTS,
    SHAPE_FUNCTIONS,
    SHAPE_KEYWORDS,
    SHAPE_METHODS,
    TENSOR_ATTRIBUTES,
    WRONG_UNDER_INDUCTOR,
)
from recompile_fix.analysis.type_tests import loads_past_device_moves

__all__ = ["BLOCKS", "TENSOR", "UNKNOWN", "consequence", "distinct", "ScalarUses", "Scope", "Use"]

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

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        return f"{self.why} at {self.where} (`{self.code}`)"


@dataclass
class Scope:
    """A function (or module) the value flows through, and what is known to be a tensor there."""

    source: SourceFile
    file: str  # as the Profile spells it
    node: cst.CSTNode  # FunctionDef or Module
    tensors: set[str] = field(default_factory=set)
    caller: tuple | None = None  # (Scope, Call) when this is a helper the value was passed into
    # In a helper: its parameters -> the caller's argument text, so ``meets`` names what the
    # first function sees (``x``), not the helper's own name for it.
    aliases: dict[str, str] = field(default_factory=dict)
    _tensor_attrs: set[str] | None = None

    def outer_name(self, code: str) -> str:
        if self.caller is None:
            return code
        return self.aliases.get(code, f"{self.node.name.value}:{code}")


@dataclass(frozen=True)
class _Path:
    scalar_math: bool = False
    int_exact: bool = True
    depth: int = 0
    visited: frozenset = frozenset()

    def after(self, operator: cst.BaseBinaryOp, other: cst.BaseExpression) -> "_Path":
        exact = (
            self.int_exact and isinstance(operator, EXACT_INT_OPS) and not isinstance(other, (cst.Float, cst.Imaginary))
        )
        return replace(self, scalar_math=True, int_exact=exact)


class ScalarUses:
    """Classify the uses of a Python number. ``read(file)`` gives another file of the project
    (as the Profile spells paths) when a value is passed into a function defined there."""

    def __init__(
        self,
        read: Callable[[str], SourceFile | None] | None = None,
        max_depth: int = 3,
        classes: ClassIndex | None = None,
        output_fields: bool = False,
    ):
        self.read = read or (lambda file: None)
        # Take the fields of a module's output for tensors (``unet(x, t).sample``), and list
        # those taken: a guess from the text (output_fields.py).
        self.output_fields = output_fields
        self.fields_taken: list[str] = []
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
        self, source: SourceFile, file: str, func: cst.FunctionDef, param: str, tensors: set[str] = frozenset()
    ) -> list[Use]:
        """Every use of parameter ``param`` inside ``func`` (``tensors``: the parameters known
        to be tensors, e.g. from the Profile's recorded inputs)."""
        scope = self.scope(source, file, func, tensors)
        uses: list[Use] = []
        for name in self._loads(source, file, func, param):
            uses.extend(self.classify(name, scope, _Path(visited=frozenset({(file, id(func), param)}))))
        return uses

    def of_expression(self, node: cst.BaseExpression, scope: Scope) -> list[Use]:
        """Where the value of one expression (``self.num_iter``, a global's name) ends up."""
        return self.classify(node, scope, _Path())

    def scope(self, source: SourceFile, file: str, node: cst.CSTNode, seeds=frozenset()) -> Scope:
        scope = Scope(source=source, file=file, node=node)
        scope.tensors = self._tensor_names(scope, set(seeds) | annotated_tensors(node))
        return scope

    # -- what is a tensor ----------------------------------------------------------------------
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
            # A module or helper called on a tensor gives a tensor (``self.fc(x)``, ``block(h)``).
            return any(self.tensorish(a.value, scope) for a in expr.args if not a.keyword)
        return False

    def _tensor_names(self, scope: Scope, seeds: set[str]) -> set[str]:
        names = set(seeds)
        scope.tensors = names
        assigns = []
        for node in walk(scope.node):
            if isinstance(node, cst.Assign):
                assigns.append(([t.target for t in node.targets], node.value))
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)) and node.value is not None:
                assigns.append(([node.target], node.value))
        changed = True
        while changed:
            changed = False
            for targets, value in assigns:
                if not self.tensorish(value, scope):
                    continue
                for target in targets:
                    for name in target_names(target):
                        if name not in names:
                            names.add(name)
                            changed = True
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
        found = set()
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
                found.add(node.args[0].value.evaluated_value)
        scope._tensor_attrs = found
        return found

    # -- following a value ---------------------------------------------------------------------
    def classify(self, expr: cst.BaseExpression, scope: Scope, path: _Path) -> list[Use]:
        source = scope.source
        node = expr
        while True:
            parent = source.parents.get(node)
            if isinstance(parent, cst.BinaryOperation):
                if isinstance(parent.operator, cst.MatrixMultiply):
                    return [self._use("matmul", "is an operand of `@`", parent, scope, path)]
                other = parent.right if node is parent.left else parent.left
                if self.tensorish(other, scope):
                    exact = not isinstance(parent.operator, cst.Power)  # `x ** c`: close, not identical
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

    def _context(self, node: cst.BaseExpression, scope: Scope, path: _Path) -> list[Use]:
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
            return [self._use("index", "is used as an index or slice", node, scope, path)]
        if isinstance(parent, cst.Return):
            if scope.caller is not None:
                caller_scope, call = scope.caller
                return self.classify(call, caller_scope, replace(path, depth=path.depth - 1))
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
                self._use(
                    "store", f"is put in `{one_line(source.code(source.parents.get(parent)))}`", node, scope, path
                )
            ]
        if isinstance(parent, cst.DictElement):
            return [self._use("store", "is stored in a dict", node, scope, path)]
        if isinstance(parent, cst.FormattedStringExpression):
            return [self._use("print", "is formatted into a string", node, scope, path)]
        return [self._use("unknown", f"is used in `{one_line(source.code(parent or node))}`", node, scope, path)]

    def _container(self, element: cst.Element, scope: Scope, path: _Path) -> list[Use] | None:
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
                constant = _constant_index(subscript) if isinstance(subscript, cst.Subscript) else None
                if constant is None:
                    return None  # read as a whole (len(), iteration, passed on): it stays a list
                if constant == index:
                    uses.extend(self.classify(subscript, scope, path))
            return uses
        return None

    def _branch(self, node: cst.CSTNode, scope: Scope):
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

    def _local(self, name: str, scope: Scope, path: _Path) -> list[Use]:
        key = (scope.file, id(scope.node), name)
        if key in path.visited:
            return []
        path = replace(path, visited=path.visited | {key})
        uses = []
        for load in self._loads(scope.source, scope.file, scope.node, name):
            uses.extend(self.classify(load, scope, path))
        return uses

    def _call(self, call: cst.Call, arg: cst.Arg, scope: Scope, path: _Path) -> list[Use]:
        source = scope.source
        func = call.func
        label = f"`{one_line(source.code(func))}()`"
        qualified = source.qualified_name(func)
        keyword = arg.keyword.value if arg.keyword is not None else None
        if arg.star:
            return [self._use("unknown", f"is unpacked into {label}", call, scope, path)]
        if qualified == "range":
            return [self._use("range", "reaches `range()`", call, scope, path)]
        if qualified in CONVERTERS:
            effect = f"a 0-d tensor {CONVERTER_WHY[qualified]}" if qualified in CONVERTER_WHY else ""
            return [self._use("convert", f"is converted by {label}", call, scope, path, effect=effect)]
        if qualified == "print":
            return [self._use("print", "is printed", call, scope, path)]
        if qualified in ("isinstance", "type", "id", "torch.is_tensor", "callable"):
            return [self._use("type", f"is type-checked by {label}", call, scope, path)]
        if qualified in ("max", "min"):
            others = [a for a in call.args if a is not arg]
            constants = [number_literal(a.value) for a in others if a.keyword is None and not a.star]
            if others and len(constants) == len(others) and all(c is not None for c in constants):
                # `max(c, 1e-5)`: a 0-d tensor compiles once, bit-identical (measured).
                exact = path.int_exact and all(isinstance(c, int) for c in constants)
                return self.classify(call, scope, replace(path, int_exact=exact))
            return [
                self._use(
                    "compare", f"is compared by Python's {label} with a value that is not a constant", call, scope, path
                )
            ]
        if qualified in PYTHON_REDUCERS:
            return [self._use("compare", f"is compared by Python's {label}", call, scope, path)]
        if qualified == "abs":
            return self.classify(call, scope, replace(path, scalar_math=True))
        if qualified == "pow":
            effect = "a 0-d tensor graph-breaks there (torch cannot trace builtin `pow`)"
            return [self._use("math", "reaches builtin `pow()`", call, scope, path, effect=effect)]
        if qualified in _CONSTRUCTORS and call.args and arg is call.args[0] and keyword is None:
            if any(a.keyword is not None and a.keyword.value == "dtype" for a in call.args):
                # `torch.tensor(c, dtype=torch.long)`: the new tensor's dtype is fixed and it reads
                # the number's value (truncating as Python's would): follow the new tensor.
                return [replace(u, scalar_slot=True) for u in self.classify(call, scope, path)]
            return [
                self._use(
                    "ctor", f"makes a new tensor with {label}, whose dtype follows its input's", call, scope, path
                )
            ]
        if qualified.startswith(("math.", "numpy.", "random.", "statistics.")):
            return [self._use("math", f"reaches {label}", call, scope, path)]
        if isinstance(func, cst.Attribute) and self.tensorish(func.value, scope):
            method = func.attr.value
            if method in WRONG_UNDER_INDUCTOR:
                return [self._use("wrong", _WRONG_FILL.format(label=label), call, scope, path)]
            slot = _scalar_slot(method, call, arg)
            if slot is not None:
                return [
                    self._use(
                        "arith",
                        "tensor arithmetic",
                        call,
                        scope,
                        path,
                        meets=(func.value,),
                        slot=True,
                        float64_only=slot,
                    )
                ]
            if method in ARITH_METHODS and keyword not in NOT_VALUE_KEYWORDS:
                exact = method not in INEXACT
                return [self._use("arith", "tensor arithmetic", call, scope, path, meets=(func.value,), exact=exact)]
            if method in SHAPE_METHODS or keyword in SHAPE_KEYWORDS:
                return [self._use("shape", f"is used as a size or dim by {label}", call, scope, path)]
            return [self._use("setting", f"is passed to {label}, which takes a Python number", call, scope, path)]
        if qualified.startswith("torch."):
            name = qualified.rsplit(".", 1)[1]
            if "dropout" in name:
                return [self._use("dropout", f"sets the dropout probability of {label}", call, scope, path)]
            if keyword == "eps":
                return [self._use("setting", f"sets `eps` of {label}", call, scope, path)]
            if name in WRONG_UNDER_INDUCTOR:
                return [self._use("wrong", _WRONG_FILL.format(label=label), call, scope, path)]
            meets = tuple(a.value for a in call.args if a is not arg and self.tensorish(a.value, scope))
            slot = _scalar_slot(name, call, arg, function=True)
            if slot is not None:
                return [
                    self._use(
                        "arith", "tensor arithmetic", call, scope, path, meets=meets, slot=True, float64_only=slot
                    )
                ]
            if name in ARITH_FUNCTIONS and keyword not in NOT_VALUE_KEYWORDS:
                exact = name not in INEXACT
                return [self._use("arith", "tensor arithmetic", call, scope, path, meets=meets, exact=exact)]
            if name in SHAPE_FUNCTIONS or keyword in SHAPE_KEYWORDS:
                return [self._use("shape", f"is used as a size or dim by {label}", call, scope, path)]
            if name in NUMBER_SETTING_FUNCTIONS:
                what = f"`{keyword}` of " if keyword else ""
                return [
                    self._use("setting", f"sets {what}{label}, which torch reads as a Python number", call, scope, path)
                ]
            return [self._use("setting", f"is passed to {label}, which takes it as a Python number", call, scope, path)]
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
        uses = []
        for load in self._loads(callee_source, callee_file, callee, param):
            uses.extend(self.classify(load, inner, inner_path))
        return uses

    def _callee(self, call: cst.Call, scope: Scope):
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

    def _callee_across_files(self, cls: cst.ClassDef, attr: str, scope: Scope):
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

    def _use(
        self,
        kind: str,
        why: str,
        node: cst.CSTNode,
        scope: Scope,
        path: _Path,
        meets=(),
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
        return Use(
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


_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})
_WRONG_FILL = (
    "fills {label}, where a 0-d float64 tensor gives wrong values under inductor (torch 2.13-2.15 "
    "return the first call's value on every later call)"
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


def _scalar_slot(name: str, call: cst.Call, arg: cst.Arg, function: bool = False) -> bool | None:
    """Does ``arg`` fill a Scalar argument of ``name`` (SCALAR_SLOTS)? None if not; else whether
    torch takes only a float64 tensor there. A torch function's index counts its tensor too."""
    if name not in SCALAR_SLOTS:
        return None
    index, keyword, float64_only = SCALAR_SLOTS[name]
    if arg.keyword is not None:
        return float64_only if arg.keyword.value == keyword else None
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional):
        return None
    offset = 1 if function and name in ("masked_fill", "masked_fill_", "fill_") else 0
    return float64_only if positional.index(arg) == index + offset else None


# What a 0-d tensor does at each kind of blocking use (measured, torch 2.13: see
# tests/test_construct_table.py), for the notes of a finding that leaves the number alone.
_CONSEQUENCES = {
    "branch": "a 0-d tensor there graph-breaks (data-dependent branch) and compiles more often",
    "range": "`range()` of a 0-d tensor graph-breaks and compiles more often",
    "convert": "it is a Python number there anyway",
    "math": "a 0-d tensor there graph-breaks or is guarded on its value (`c.item() == 0.25`): no fewer compiles",
    "dropout": "a 0-d tensor p graph-breaks in F.dropout (and fails under fullgraph)",
    "setting": "torch reads it as a Python number there and guards on its value: no fewer compiles",
    "shape": "a size from a 0-d tensor is guarded on its value or graph-breaks: no fewer compiles",
    "index": "an index from a 0-d tensor is guarded on its value or graph-breaks: no fewer compiles",
    "compare": "a 0-d tensor there graph-breaks or is guarded on its value",
    "return": "the caller would receive a tensor instead of a number",
    "wrong": "it must stay a Python number there",
    "type": "a 0-d tensor takes another path there",
    "ctor": "a float64 0-d tensor there makes a float64 tensor where the number made one of the default dtype",
}


def consequence(use: Use) -> str:
    """Why a blocking use keeps the value a Python number, in a few words."""
    return use.effect or _CONSEQUENCES.get(use.kind, "it must stay a Python number there")


def distinct(uses: Iterable[Use]) -> list[Use]:
    """The uses in order, one per (why, file, line): a value read twice on a line is one use."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for use in uses:
        key = (use.why, use.file, use.line)
        if key not in seen:
            seen.add(key)
            out.append(use)
    return out
