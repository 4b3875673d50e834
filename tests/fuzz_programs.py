"""Generated programs around a recompiling call, and the Profile `recompile-fix profile` would
record on each (tests/test_fuzz_programs.py).

A program calls a compiled ``f(PARAM, c)`` once per loop turn with a tensor whose size changes
(RF001's case), a Python number that changes (RF002's), or both; the call sits in one of the
positions a call can take (an expression statement, an assignment, a condition, a lambda, a
comprehension, a with item, a default argument, a one-line block, after a `;` ...), at module
level or in a function (with `global`/`nonlocal`, a lambda reading a global named like the
parameter, a function reading a builtin of that name), in a file with LF, CRLF or CR line
ends, a byte-order mark, a coding line, non-ASCII text before the call, tabs, `import torch as
th`. Every program runs (with real torch, and with tests/fake_torch.py).

The Profile is a real recorded one (golden/RF001/seed_shape_change, golden/RF002/seed_scalar_loop)
with its frame, call sites, inputs, guard texts and hashes made to fit the program: the span
CPython would record (UTF-8 byte columns of the call), or none (PYTHONNODEBUGRANGES=1).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
_SHAPE_TEMPLATE = json.loads((GOLDEN / "RF001" / "seed_shape_change" / "profile.json").read_text())
_SCALAR_TEMPLATE = json.loads((GOLDEN / "RF002" / "seed_scalar_loop" / "profile.json").read_text())

SIZES = (3, 4, 5)
SCALARS = (0.5, 1.5, 2.5)

# Where the call sits, as statements of the loop body. {C} is the call; {I} one more indent. The names RESULTS, box, xs, g, ctx are
# the driver's. `fixable`: a position where the fix is expected to be made (else it may be left
# out, with a reason: a lambda, a comprehension, a condition of a while, ...).
POSITIONS: dict[str, tuple[str, bool]] = {
    "expression": ("RESULTS.append({C})", True),
    "assign": ("y = {C}\nRESULTS.append(y)", True),
    "annotated": ("y: object = {C}\nRESULTS.append(y)", True),
    "augmented": ("y = 0\ny += {C}\nRESULTS.append(y)", True),
    "method_on_result": ('print("sum", {C}.sum().item())\nRESULTS.append(0)', True),
    "nested_call": ("RESULTS.append(g(g({C})))", True),
    "keyword_of_other": ("RESULTS.append(g(value={C}))", True),
    "unary": ("RESULTS.append(-{C})", True),
    "binary": ("RESULTS.append(1 + {C})", True),
    # A call that runs on some evaluations of its statement only (issue 32): nothing may be bound
    # or marked before the statement (it would run where the call does not); RF002's in-place
    # wrap keeps the order. RF001 makes no fix there.
    "conditional": ("RESULTS.append({C} if n > 0 else None)", False),
    "conditional_skipped": ("RESULTS.append({C} if n > 4 else None)", False),
    "conditional_else": ("RESULTS.append(None if n < 4 else {C})", False),
    "and_operand": ("RESULTS.append(n > 3 and {C})", False),
    "or_operand": ("RESULTS.append(n > 3 or {C})", False),
    "chained_comparison": ("RESULTS.append(4 < n < {C}.sum().item())", False),
    "setcomp_dictcomp": ("RESULTS.extend({{k: {C} for k in range(1)}}.values())", False),
    # The same call in an elif test and its body: the compiled site is the elif's; RF002 wraps
    # both calls or neither.
    "elif_and_body": ("if n < 0:\n{I}pass\nelif {C} is not None:\n{I}RESULTS.append({C})", False),
    # Two calls on one line: the first compiles, the second is a cache hit.
    "two_on_line": ("y = {C}; RESULTS.append({C})", True),
    "dict_display": ('RESULTS.append({{"k": {C}}}["k"])', True),
    "tuple_with_text": ('RESULTS.append(("ünï", {C})[1])', True),
    "fstring": ('RESULTS.append(f"{{{C}}}")', True),
    "starred": ("RESULTS.extend([*[{C}]])", True),
    "walrus_around": ("if (y := {C}) is not None:\n{I}RESULTS.append(y)", True),
    "if_test": ("if {C}.sum().item() > -1:\n{I}RESULTS.append(1)", True),
    "elif_test": ("if n < 0:\n{I}pass\nelif {C}.sum().item() > -1:\n{I}RESULTS.append(2)", False),
    "while_test": ("while {C}.sum().item() < 0:\n{I}pass\nRESULTS.append(3)", False),
    "for_iter": ("for t in [{C}]:\n{I}RESULTS.append(t)", True),
    "with_item": ("with ctx({C}) as t:\n{I}RESULTS.append(t)", True),
    "assert": ("assert {C} is not None\nRESULTS.append(4)", False),  # `python -O` skips it
    "return": ("RESULTS.append(helper(n))", True),  # the call is in helper's return
    "yield": ("RESULTS.extend(gen(n))", True),  # ... in gen's yield
    "try_body": ("try:\n{I}RESULTS.append({C})\nexcept ZeroDivisionError:\n{I}pass", True),
    "finally_body": ("try:\n{I}pass\nfinally:\n{I}RESULTS.append({C})", True),
    "match_case": ("match n:\n{I}case _:\n{I}{I}RESULTS.append({C})", True),
    "lambda": ("RESULTS.append((lambda: {C})())", False),
    "listcomp": ("RESULTS.extend([{C} for _ in range(1)])", False),
    "genexp": ("RESULTS.extend(list({C} for _ in range(1)))", False),
    "one_line_block": ("if n > 0: RESULTS.append({C})", False),
    "after_semicolon": ("y = 1; RESULTS.append({C})", True),
    "default_argument": ("def h(v={C}):\n{I}return v\nRESULTS.append(h())", False),
    "class_body": (  # a name bound there would be a class attribute
        "class Holder:\n{I}value = {C}\nRESULTS.append(Holder.value)\nRESULTS.append(sorted(vars(Holder)))",
        False,
    ),
    "nonlocal": (
        "acc = None\ndef inner():\n{I}nonlocal acc\n{I}acc = {C}\ninner()\nRESULTS.append(acc)",
        True,
    ),
}

# How the tensor argument is written. {T} is the tensor (`torch.ones(n)`), {P} the parameter name.
ARGUMENTS: dict[str, tuple[str, str]] = {
    # name: (statement before the call ("" for none), the argument expression)
    "call": ("", "{torch}.ones(n)"),
    "name": ("{P} = {torch}.ones(n)", "{P}"),
    "other_name": ("t0 = {torch}.ones(n)", "t0"),
    "same_line_name": ("{P} = {torch}.ones(n);", "{P}"),  # joined with the call's line by `;`
    "walrus": ("", "{P} := {torch}.ones(n)"),
    "subscript": ("", "xs[n - 3]"),
    "attribute": ("box.t = {torch}.ones(n)", "box.t"),
    "parenthesized": ("", "({torch}.ones(n))"),
    "binop": ("", "{torch}.ones(n) + 0"),
    "keyword": ("", "{P}={torch}.ones(n)"),
    "fixed_shape": ("", "{torch}.ones(3)"),  # only the number changes (RF002 alone)
}

SCALAR_ARGUMENTS = {"constant": "0.5", "varying": "n - 2.5"}  # passed as `c=...` after a keyword


@dataclass(frozen=True)
class Program:
    text: str  # with the file's line endings, BOM and all
    position: str
    argument: str
    scalar: str
    scope: str
    param: str
    ending: str
    nodebugranges: bool
    traps: tuple[str, ...]

    @property
    def data(self) -> bytes:
        return self.text.encode("utf-8")

    @property
    def fix_expected(self) -> bool:
        """Must `apply` fix it (a plain case: no position, argument or trap that may stop it)?"""
        return (
            POSITIONS[self.position][1]
            and self.argument in ("call", "name", "walrus", "parenthesized", "binop", "keyword")
            and not self.nodebugranges
            and self.scalar == "constant"
        )

    def describe(self) -> str:
        return (
            f"position={self.position} argument={self.argument} scalar={self.scalar} scope={self.scope} "
            f"param={self.param} ending={self.ending!r} nodebugranges={self.nodebugranges} traps={self.traps}"
        )


@st.composite
def programs(draw) -> Program:
    position = draw(st.sampled_from(sorted(POSITIONS)))
    argument = draw(st.sampled_from(sorted(ARGUMENTS)))
    scalar = draw(st.sampled_from(sorted(SCALAR_ARGUMENTS)))
    # function_shadowing_torch: the loop is in `def main(torch=None)` (the module's name for torch
    # as a parameter; the program makes its tensors through `T = torch`): inserted code must
    # name the module another way.
    scope = draw(st.sampled_from(["module", "function", "function_global", "function_shadowing_torch"]))
    param = draw(st.sampled_from(["x", "input", "data", "x_1"]))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    indent = draw(st.sampled_from(["    ", "  ", "\t"]))
    alias = draw(st.sampled_from(["torch", "th"]))
    traps = tuple(
        t
        for t in ("global_read_by_lambda", "builtin_reader", "bom", "coding_line", "unicode_comment")
        if draw(st.booleans())
    )
    nodebugranges = draw(st.booleans())
    compound = ("if ", "while ", "for ", "with ", "try:", "match ", "class ", "def ")
    if argument == "same_line_name" and POSITIONS[position][0].startswith(compound):
        argument = "name"  # `x = ...; if ...:` does not parse: a compound statement starts its line
    if position == "nonlocal" and scope == "module":
        scope = "function"  # nonlocal needs an enclosing function
    text = _program_text(position, argument, scalar, scope, param, indent, alias, traps)
    text = text.replace("\n", ending)
    if "bom" in traps:
        text = "\ufeff" + text
    return Program(text, position, argument, scalar, scope, param, ending, nodebugranges, traps)


def _program_text(position, argument, scalar, scope, param, indent, alias, traps) -> str:
    torch = "T" if scope == "function_shadowing_torch" else alias
    before, arg = ARGUMENTS[argument]
    before = before.format(P=param, torch=torch)
    arg = arg.format(P=param, torch=torch)
    scalar_arg = SCALAR_ARGUMENTS[scalar]
    call = f"f({arg}, {'c=' if argument == 'keyword' else ''}{scalar_arg})"
    helper: list[str] = []
    if position in ("return", "yield"):
        name, keyword = ("helper", "return") if position == "return" else ("gen", "yield")
        if argument == "same_line_name":
            body = [f"{before} {keyword} {call}"]
        else:
            body = ([before] if before else []) + [f"{keyword} {call}"]
        helper = [f"def {name}(n):"] + [indent + line for line in body]
        statement, before = POSITIONS[position][0], ""
    else:
        statement = POSITIONS[position][0].format(C=call, I=indent)
    if argument == "same_line_name" and before:
        statement, before = f"{before} {statement}", ""
    comment = "  # ünïcödé →" if "unicode_comment" in traps else ""
    loop = [f"for n in {SIZES}:{comment}"]
    if before:
        loop.append(indent + before)
    loop += [indent + line for line in statement.split("\n")]

    lines = ["# -*- coding: utf-8 -*-"] if "coding_line" in traps else []
    lines += [f'"""Generated: {position} / {argument} / {scalar} / {scope}."""', ""]
    lines += ["import contextlib", "", f"import torch{' as th' if alias == 'th' else ''}", ""]
    if scope == "function_shadowing_torch":
        lines += [f"T = {alias}", ""]
    if "global_read_by_lambda" in traps:
        lines += [f"{param} = 2.0", "t0 = 3.0"]
    lines += ["RESULTS = []", "xs = [" + ", ".join(f"{torch}.ones({s})" for s in SIZES) + "]"]
    lines += ["box = type('Box', (), {})()", "", ""]
    lines += ["def g(value):", f"{indent}return value", "", ""]
    lines += ["def ctx(value):", f"{indent}return contextlib.nullcontext(value)", "", ""]
    if "builtin_reader" in traps:
        lines += ["def reads_builtin():", f"{indent}return callable(input)", "", ""]
    lines += [f"@{torch}.compile", f"def f({param}, c):", f"{indent}return {param} * c", "", ""]
    if helper:
        lines += helper + ["", ""]
    if scope == "module":
        lines += loop
        if "global_read_by_lambda" in traps:
            lines += [f"RESULTS.append((lambda v: v * {param} * t0)(1.0))"]
    else:
        lines += [f"def main({alias}=None):" if scope == "function_shadowing_torch" else "def main():"]
        if scope == "function_global":
            lines += [f"{indent}global LAST"]
        if "global_read_by_lambda" in traps:
            lines += [f"{indent}scale = lambda v: v * {param} * t0"]
        lines += [indent + line for line in loop]
        if scope == "function_global":
            lines += [f"{indent}LAST = RESULTS[-1]"]
        if "global_read_by_lambda" in traps:
            lines += [f"{indent}RESULTS.append(scale(1.0))"]
        lines += ["", "", "main()"]
    if "builtin_reader" in traps:
        lines += ["RESULTS.append(reads_builtin())"]
    lines += ["print(RESULTS)"]
    return "\n".join(lines) + "\n"


# -- the Profile --------------------------------------------------------------------------------
def _calls_of_f(tree: ast.Module) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "f"]


def _enclosing_function(tree: ast.Module, node: ast.AST) -> str:
    names = {
        ast.Lambda: "<lambda>",
        ast.ListComp: "<listcomp>",
        ast.GeneratorExp: "<genexpr>",
        ast.SetComp: "<setcomp>",
        ast.DictComp: "<dictcomp>",
    }
    best, best_span = "<module>", None
    for scope in ast.walk(tree):
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, *names)):
            inside = (scope.lineno, scope.col_offset) <= (node.lineno, node.col_offset) and (
                node.end_lineno,
                node.end_col_offset,
            ) <= (scope.end_lineno, scope.end_col_offset)
            if inside and scope is not node:
                span = (scope.lineno, scope.col_offset)
                if best_span is None or span > best_span:
                    name = names.get(type(scope)) or scope.name
                    best, best_span = name, span
    return best


def profile_for(program: Program) -> dict:
    """The Profile a profile run of ``program`` records (shaped as the tool writes it)."""
    tree = ast.parse(program.text.lstrip("\ufeff"))
    bom = 3 if program.text.startswith("\ufeff") else 0
    # The first call in the text compiles (the others of a line or an elif's body are cache hits).
    call = min(_calls_of_f(tree), key=lambda c: (c.lineno, c.col_offset))
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "f")
    shape_varies = program.argument != "fixed_shape"
    scalar_varies = program.scalar != "constant"
    site = {
        "file": "program.py",
        "line": call.lineno,
        "end_line": call.end_lineno,
        "col": call.col_offset + (bom if call.lineno == 1 else 0),
        "end_col": call.end_col_offset + (bom if call.end_lineno == 1 else 0),
        "function": _enclosing_function(tree, call),
    }
    if program.nodebugranges:
        site = {"file": "program.py", "line": call.lineno, "function": site["function"]}
    template = copy.deepcopy(_SHAPE_TEMPLATE if shape_varies else _SCALAR_TEMPLATE)
    compile_template = template["frames"][0]["compiles"][0]
    compiles = []
    scalars = [n - 2.5 for n in SIZES] if scalar_varies else [0.5] * len(SIZES)
    for k, (size, value) in enumerate(zip(SIZES, scalars)):
        compile_ = copy.deepcopy(compile_template)
        compile_["id"] = f"0/{k}"
        compile_["stack"] = [dict(site)]
        compile_["inputs"] = {
            program.param: {
                "type": "Tensor",
                "shape": [size if shape_varies else 3],
                "stride": [1],
                "dtype": "float32",
            },
            "c": {"type": "float", "value": value},
        }
        reasons = []
        if k:
            previous = f"0/{k - 1}"
            if shape_varies:
                reasons.append(
                    {
                        "kind": "size_mismatch",
                        "text": f"{previous}: tensor '{program.param}' size mismatch at index 0. expected "
                        f"{SIZES[k - 1]}, actual {size}",
                        "entry": previous,
                        "source": program.param,
                        "dim": 0,
                        "expected": SIZES[k - 1],
                        "actual": size,
                    }
                )
            if scalar_varies:
                reasons.append(
                    {
                        "kind": "scalar_value",
                        "text": f"{previous}: c == {scalars[k - 1]}",
                        "entry": previous,
                        "source": "c",
                        "value": scalars[k - 1],
                        "value_type": "float",
                    }
                )
        compile_["reasons"] = reasons
        compiles.append(compile_)
        if not shape_varies and not scalar_varies:
            break  # nothing changes: one compile
    frame = template["frames"][0]
    frame.update(
        file="program.py",
        first_line=func.decorator_list[0].lineno if func.decorator_list else func.lineno,
        name="f",
        compiles=compiles,
        graph_breaks=[],
    )
    template["frames"] = [frame]
    template["sources"] = {"program.py": hashlib.sha256(program.data).hexdigest()}
    template["applied"] = {}
    template["command"] = ["python", "program.py"]
    return template


def report(seen, suite: str, shard: int) -> None:
    """With RECOMPILE_FIX_FUZZ_REPORT=FILE, append what a shard saw (for the longer runs)."""
    path = os.environ.get("RECOMPILE_FIX_FUZZ_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            rows = [[list(key), count] for key, count in sorted(seen.items())]
            fh.write(json.dumps({"suite": suite, "shard": shard, "seen": rows}) + "\n")
