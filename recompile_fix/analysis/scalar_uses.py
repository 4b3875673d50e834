"""Would a Python number still do the same thing as a 0-d tensor? The question the rules that
wrap constants in tensors (RF002, RF003, RF006) ask of the source before they edit it.

A 0-d tensor computes the same as a Python number in tensor arithmetic (``x * c``,
``torch.clamp(x, max=c)``), but not where Python or torch needs the number itself: ``range(c)``,
``if c == 0``, ``math.sqrt(c)``, a dropout probability, an ``eps``, a shape. Those fail to
compile or silently change the graph (torch-2.13-recompile-facts.md §8).

``ScalarUses`` follows a value through one function with libcst (``scalar_flow``: through Python
arithmetic (``c * 2``), into locals it is assigned to, and into the functions it is passed to
when their source is readable; ``scalar_tensors``: what is a tensor there) and classifies every
place it ends up (here the calls it is passed to; the other places in ``scalar_flow``):

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

from collections.abc import Iterable
from dataclasses import replace

import libcst as cst

from recompile_fix.analysis.cst_names import number_literal, one_line
from recompile_fix.analysis.scalar_flow import BLOCKS, TENSOR, UNKNOWN, FlowPath, Use, ValueFlow
from recompile_fix.analysis.scalar_tensors import Scope
from recompile_fix.analysis.torch_vocabulary import (
    ARITH_FUNCTIONS,
    ARITH_METHODS,
    CONVERTER_WHY,
    CONVERTERS,
    INEXACT,
    NOT_VALUE_KEYWORDS,
    NUMBER_SETTING_FUNCTIONS,
    PYTHON_REDUCERS,
    SCALAR_SLOTS,
    SHAPE_FUNCTIONS,
    SHAPE_KEYWORDS,
    SHAPE_METHODS,
    TENSOR_DATA_CALLS,
    WRONG_UNDER_INDUCTOR,
)

__all__ = ["BLOCKS", "TENSOR", "UNKNOWN", "consequence", "distinct", "ScalarUses", "Scope", "Use"]


class ScalarUses(ValueFlow):
    """Classify the uses of a Python number. ``read(file)`` gives another file of the project
    (as the Profile spells paths) when a value is passed into a function defined there."""

    def _call(self, call: cst.Call, arg: cst.Arg, scope: Scope, path: FlowPath) -> list[Use]:
        """What ``call`` does with the value passed as ``arg``: Python's builtins and ``math``
        need the number; torch takes it as a tensor operand or reads it as a number; a function
        of the project is followed into."""
        func = call.func
        label = f"`{one_line(scope.source.code(func))}()`"
        qualified = scope.source.qualified_name(func)
        if arg.star:
            return [self._use("unknown", f"is unpacked into {label}", call, scope, path)]
        python = self._python_call(qualified, label, call, arg, scope, path)
        if python is not None:
            return python
        if isinstance(func, cst.Attribute) and self.tensorish(func.value, scope):
            return self._tensor_method(func, label, call, arg, scope, path)
        if qualified.startswith("torch."):
            return self._torch_function(qualified, label, call, arg, scope, path)
        return self._into_callee(call, arg, label, scope, path)

    def _python_call(
        self, qualified: str, label: str, call: cst.Call, arg: cst.Arg, scope: Scope, path: FlowPath
    ) -> list[Use] | None:
        """Python's builtins, ``math`` and its kin, and torch's tensor constructors: the uses
        there (the builtins that pass the value on, followed). None for any other call."""
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
        if qualified in TENSOR_DATA_CALLS and call.args and arg is call.args[0] and arg.keyword is None:
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
        return None

    def _tensor_method(
        self, func: cst.Attribute, label: str, call: cst.Call, arg: cst.Arg, scope: Scope, path: FlowPath
    ) -> list[Use]:
        """A method of a tensor (``x.masked_fill(m, c)``, ``x.add(c)``, ``x.view(c)``)."""
        keyword = arg.keyword.value if arg.keyword is not None else None
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
        if method == "roll":
            return [self._roll(label, call, arg, scope, path, shifts_at=0)]
        if method in SHAPE_METHODS or keyword in SHAPE_KEYWORDS:
            return [self._use("shape", f"is used as a size or dim by {label}", call, scope, path)]
        return [self._use("setting", f"is passed to {label}, which takes a Python number", call, scope, path)]

    def _roll(self, label: str, call: cst.Call, arg: cst.Arg, scope: Scope, path: FlowPath, shifts_at: int) -> Use:
        """``roll``'s shift stays symbolic in a dynamic graph (measured, torch 2.13: shifts 3..20
        compile once, eager and inductor); its dims are dims, guarded on their value."""
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "shifts" or (keyword is None and call.args.index(arg) == shifts_at):
            return self._use("shape", f"sets the shift of {label}", call, scope, path)
        return self._use("dim", f"is used as a dim by {label}", call, scope, path)

    def _torch_function(
        self, qualified: str, label: str, call: cst.Call, arg: cst.Arg, scope: Scope, path: FlowPath
    ) -> list[Use]:
        """A function of torch (``torch.clamp(x, max=c)``, ``F.dropout(x, p)``, ``torch.zeros(c)``)."""
        keyword = arg.keyword.value if arg.keyword is not None else None
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
                self._use("arith", "tensor arithmetic", call, scope, path, meets=meets, slot=True, float64_only=slot)
            ]
        if name in ARITH_FUNCTIONS and keyword not in NOT_VALUE_KEYWORDS:
            exact = name not in INEXACT
            return [self._use("arith", "tensor arithmetic", call, scope, path, meets=meets, exact=exact)]
        if name == "roll":
            return [self._roll(label, call, arg, scope, path, shifts_at=1)]
        if name in SHAPE_FUNCTIONS or keyword in SHAPE_KEYWORDS:
            return [self._use("shape", f"is used as a size or dim by {label}", call, scope, path)]
        if name in NUMBER_SETTING_FUNCTIONS:
            what = f"`{keyword}` of " if keyword else ""
            return [
                self._use("setting", f"sets {what}{label}, which torch reads as a Python number", call, scope, path)
            ]
        return [self._use("setting", f"is passed to {label}, which takes it as a Python number", call, scope, path)]


_WRONG_FILL = (
    "fills {label}, where a 0-d float64 tensor gives wrong values under inductor (torch 2.13-2.15 "
    "return the first call's value on every later call)"
)


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
    "slice": "a slice bound from a 0-d tensor is guarded on its value or graph-breaks: no fewer compiles",
    "sequence_index": "a Python sequence needs the index's value: a dynamic int or a 0-d tensor fails or is "
    "specialised there",
    "compare": "a 0-d tensor there graph-breaks or is guarded on its value",
    "return": "the caller would receive a tensor instead of a number",
    "tensor_data": "a 0-d tensor there gives the new tensor its own dtype",
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
