"""Reading the code around a call RF001 marks: the ``torch.compile`` call of a function, the
argument a guard source names, what runs before it, the binding right before the call, and the
marks already written there (the tool's or a hand's). Source analyses only: they return nodes,
names and dims; the rule decides what to write.
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_targets import Base
from recompile_fix.analysis.cst_walk import dotted_name, is_name, walk
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile

__all__ = [
    "MARK_CALLS",
    "argument_for_base",
    "binding_right_before",
    "call_runs_before_argument",
    "calls_nothing",
    "compiled_module",
    "contains_node",
    "find_compile_call",
    "fresh_name",
    "holds_only_calls",
    "is_atomic_expression",
    "is_contiguous_copy",
    "is_plain_dotted",
    "scope_statement",
    "statement_start",
    "marked_dims",
    "loop_marks_before",
    "marks_before",
    "name_used_elsewhere",
    "node_at_span",
    "root_name",
    "runs_cuda_graphs",
    "squeezed_code",
]

# Modes and backends that run CUDA graphs, which specialise every float and record a graph per size.
_CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


def find_compile_call(
    project: Project, path: str, names: set[str], *, dynamic_true: bool = False
) -> tuple[SourceFile, cst.CSTNode, bool] | None:
    """The one ``torch.compile(<name>...)``, ``<name>.compile(...)``, ``<name> = torch.compile(...)``
    or ``@torch.compile`` on ``def <name>`` in the file: (file, the call or bare decorator, whether
    it has ``dynamic=``). None where it says ``dynamic=True`` already, unless ``dynamic_true``, and
    where it passes ``**options`` (whatever a fix added could be a keyword the dict holds)."""
    source = project.source(path)
    if source is None:
        return None
    found: list[cst.CSTNode] = []
    for node in source.nodes(cst.Call):
        qualified = source.qualified_name(node.func)
        if qualified == "torch.compile":
            target = root_name(node.args[0].value) if node.args and node.args[0].keyword is None else None
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "compile":
            target = root_name(node.func.value)
        else:
            continue
        bound = next(
            (root_name(t.target) for a in source.ancestors(node) if isinstance(a, cst.Assign) for t in a.targets),
            None,
        )
        decorated = next((a.name.value for a in source.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
        is_decorator = isinstance(source.parents.get(node), cst.Decorator)
        if names & {target, bound} or (is_decorator and decorated in names):
            found.append(node)
    for func in source.nodes(cst.FunctionDef):
        for decorator in func.decorators:
            if func.name.value in names and source.qualified_name(decorator.decorator) == "torch.compile":
                found.append(decorator.decorator)  # bare @torch.compile
    if len(found) != 1:
        return None
    node = found[0]
    if not isinstance(node, cst.Call):
        return source, node, False
    if any(a.star == "**" for a in node.args):
        return None  # `torch.compile(f, **options)`: a keyword added there may be one the dict holds
    dynamic = next((a for a in node.args if a.keyword is not None and a.keyword.value == "dynamic"), None)
    if (
        dynamic is not None
        and isinstance(dynamic.value, cst.Name)
        and dynamic.value.value == "True"
        and not dynamic_true
    ):
        return None  # already dynamic: nothing to edit there
    return source, node, dynamic is not None


def runs_cuda_graphs(source: SourceFile, node: cst.CSTNode) -> bool:
    """Does the compile call ``node`` ask for CUDA graphs (``mode="reduce-overhead"``, a
    cudagraphs backend or option)?"""
    if not isinstance(node, cst.Call):
        return False
    for arg in node.args:
        if arg.keyword is None:
            continue
        text = source.code(arg.value)
        if arg.keyword.value == "mode" and any(m in text for m in _CUDAGRAPH_MODES) and "no-cudagraphs" not in text:
            return True
        if arg.keyword.value in ("backend", "options") and "cudagraphs" in text:
            return True
    return False


def calls_nothing(func: cst.FunctionDef | None) -> bool:
    """Is the compiled body plain operators on its values (``x + c``), with no call into code
    that might need a concrete size?"""
    return func is not None and not any(isinstance(n, cst.Call) for n in walk(func.body))


def node_at_span(source: SourceFile, kind: type, span: list[int]) -> Any:
    return next(
        n
        for n in source.nodes(kind)
        if [
            source.positions[n].start.line,
            source.positions[n].start.column,
            source.positions[n].end.line,
            source.positions[n].end.column,
        ]
        == span
    )


def argument_for_base(call: cst.Call, base: Base) -> cst.Arg | None:
    if base.keyword is not None:
        return next((a for a in call.args if a.keyword is not None and a.keyword.value == base.keyword), None)
    if base.star:
        return next((a for a in call.args if a.star == "**"), None)
    if base.index is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        return positional[base.index] if base.index < len(positional) else None
    return None


def is_plain_dotted(node: cst.BaseExpression) -> bool:
    return bool(dotted_name(node)) and not getattr(node, "lpar", None)


def root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def contains_node(root: cst.CSTNode, predicate) -> bool:
    return any(predicate(n) for n in walk(root))


# Tensor methods that return a new tensor and change nothing (not even the random state): two of
# them run in either order alike. (`.to()` of a module moves it in place; in an argument list it
# is a tensor's.)
_PURE_METHODS = frozenset(
    {
        "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "long", "int", "bool", "contiguous",
        "clone", "detach", "view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "flatten",
        "type", "pin_memory",
    }
)  # fmt: skip


# torch's functions that build a tensor from their arguments and touch nothing else (no random
# numbers: their order is the program's): `td_loss(torch.stack(obs), torch.tensor(acts))`.
_PURE_TORCH_FUNCTIONS = frozenset(
    {
        "stack", "cat", "concat", "concatenate", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full",
        "arange", "zeros_like", "ones_like", "full_like", "where",
    }
)  # fmt: skip


def _pure(node: cst.Call) -> bool:
    func = node.func
    if not isinstance(func, cst.Attribute):
        return False
    if isinstance(func.value, cst.Name) and func.value.value == "torch":
        return func.attr.value in _PURE_TORCH_FUNCTIONS
    return func.attr.value in _PURE_METHODS


def call_runs_before_argument(source: SourceFile, statement, call: cst.Call, arg: cst.Arg) -> bool:
    """Does any other call in the statement run before ``arg`` is evaluated (one that could see
    the difference: not where both it and every call in ``arg`` are pure tensor methods or torch
    functions, such as ``batch["ids"].to(device)`` beside ``batch["mask"].to(device)``)?"""
    arg_start = source.span(arg)[0]
    inside_arg = {id(n) for n in walk(arg)}
    arg_pure = all(_pure(n) for n in walk(arg) if isinstance(n, cst.Call))
    for node in source.nodes(cst.Call):
        if node is call or id(node) in inside_arg:
            continue
        if arg_pure and _pure(node) and all(_pure(n) for n in walk(node) if isinstance(n, cst.Call)):
            continue
        start = source.span(node)[0]
        if start < arg_start and source.span(statement)[0] <= start:
            if call in set(source.ancestors(node)) and not contains_node(call.func, lambda n, node=node: n is node):
                return True  # an earlier argument of the same call
            if call not in set(source.ancestors(node)) and node not in set(source.ancestors(call)):
                return True
    return False


def is_atomic_expression(node: cst.BaseExpression) -> bool:
    """Can ``.clone(...)`` be appended to this expression's text without parentheses?"""
    return isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not node.lpar


def binding_right_before(source: SourceFile, statement, name: str) -> cst.BaseExpression | None:
    """The value of ``name = value`` when that is the statement right before ``statement`` in
    the same block, and the value takes ``.clone(...)`` as it is."""
    block = source.parents.get(statement)
    body = list(getattr(block, "body", ()))
    index = next((i for i, s in enumerate(body) if s is statement), 0)
    if index == 0 or not isinstance(body[index - 1], cst.SimpleStatementLine):
        return None
    (small, *rest) = body[index - 1].body
    if (
        rest
        or not isinstance(small, cst.Assign)
        or len(small.targets) != 1
        or not is_name(small.targets[0].target, name)
    ):
        return None
    return small.value if is_atomic_expression(small.value) else None


def name_used_elsewhere(source: SourceFile, call: cst.Call, name: str) -> bool:
    """Is ``name`` read anywhere in the function around ``call`` other than as its argument?"""
    scope = next((a for a in source.ancestors(call) if isinstance(a, cst.FunctionDef)), source.module)
    in_call = {id(n) for n in walk(call)}
    bound = set()
    for node in walk(scope):
        if isinstance(node, cst.AssignTarget) and is_name(node.target, name):
            bound.add(id(node.target))
    return any(is_name(n, name) and id(n) not in in_call and id(n) not in bound for n in walk(scope))


MARK_CALLS = ("mark_dynamic", "maybe_mark_dynamic", "mark_unbacked")


def squeezed_code(code: str) -> str:
    return "".join(code.split()).replace("'", '"')


def marks_before(source: SourceFile, statement, expr: str) -> tuple[dict[int, int], int | None]:
    """The dims of ``expr`` marked by the statements before ``statement`` in its block, up to the
    one that binds its root name (dim -> line), and the line of a contiguous copy made there. An
    ``if <...> is not None:`` holding only marks (the fix's own, for an optional tensor) counts."""
    block = source.parents.get(statement)
    body = list(getattr(block, "body", ()))
    index = next((i for i, s in enumerate(body) if s is statement), 0)
    root = re.match(r"[A-Za-z_][A-Za-z_0-9]*", expr)
    name = root.group(0) if root else expr
    wanted = squeezed_code(expr)
    marked: dict[int, int] = {}

    def scan(small: cst.BaseSmallStatement, line: int) -> None:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            for dim in marked_dims(source, small.value, wanted):
                marked.setdefault(dim, line)

    for earlier in reversed(body[:index]):
        line = source.positions[earlier].start.line
        if isinstance(earlier, cst.If) and earlier.orelse is None and holds_only_calls(earlier.body):
            for inner in earlier.body.body:
                for small in getattr(inner, "body", ()):
                    scan(small, source.positions[inner].start.line)
            continue
        if _is_mark_loop(earlier):
            continue  # binds only its own variable: marks above it still hold
        if not isinstance(earlier, cst.SimpleStatementLine):
            break  # a compound statement may bind the name: marks above it are not known to hold
        for small in reversed(earlier.body):
            if isinstance(small, cst.Assign) and any(is_name(t.target, name) for t in small.targets):
                copy = expr == name and is_contiguous_copy(small.value)
                return marked, line if copy else None
            if isinstance(small, (cst.AugAssign, cst.AnnAssign)) and is_name(small.target, name):
                return marked, None
            scan(small, line)
    return marked, None


def loop_marks_before(source: SourceFile, statement, container: str) -> tuple[dict[str, set[int]], int | None]:
    """The marks a ``for item in <container>:`` loop right before ``statement`` (in the statements
    between it and the one that binds the container's root name) puts on each item: the item's
    steps as code (``.keys``, ``[0]``; "" for the item itself) -> its marked dims, and the loop's
    line. The loop's variable may have any name (the fix picks a fresh one). Nothing found:
    ({}, None)."""
    block = source.parents.get(statement)
    body = list(getattr(block, "body", ()))
    index = next((i for i, s in enumerate(body) if s is statement), 0)
    root = re.match(r"[A-Za-z_][A-Za-z_0-9]*", container)
    name = root.group(0) if root else container
    wanted = squeezed_code(container)
    for earlier in reversed(body[:index]):
        if _is_mark_loop(earlier) and squeezed_code(source.code(earlier.iter)) == wanted:
            var = earlier.target.value
            leaves: dict[str, set[int]] = {}
            for inner in _loop_calls(earlier):
                first = squeezed_code(source.code(inner.args[0].value)) if inner.args else ""
                steps = first[len(var) :] if re.match(rf"{re.escape(var)}(?![A-Za-z_0-9])", first) else None
                if steps is None:
                    continue
                dims = marked_dims(source, inner, first)
                if dims:
                    leaves.setdefault(steps, set()).update(dims)
            return leaves, source.positions[earlier].start.line
        if isinstance(earlier, cst.If) and earlier.orelse is None and holds_only_calls(earlier.body):
            continue
        if _is_mark_loop(earlier):
            continue
        if not isinstance(earlier, cst.SimpleStatementLine):
            break
        if any(
            (isinstance(small, cst.Assign) and any(is_name(t.target, name) for t in small.targets))
            or (isinstance(small, (cst.AugAssign, cst.AnnAssign)) and is_name(small.target, name))
            for small in earlier.body
        ):
            break
    return {}, None


def _is_mark_loop(statement: Any) -> bool:
    """``for item in <expr>:`` holding only calls (or ``if`` tests holding only calls): the loops
    RF001 writes over a list's items, which bind nothing but their variable."""
    if not (isinstance(statement, cst.For) and statement.orelse is None and isinstance(statement.target, cst.Name)):
        return False
    body = statement.body
    if not isinstance(body, cst.IndentedBlock):
        return False
    return all(
        holds_only_calls(cst.IndentedBlock(body=[s]))
        or (isinstance(s, cst.If) and s.orelse is None and holds_only_calls(s.body))
        for s in body.body
    )


def _loop_calls(loop: cst.For) -> list[cst.Call]:
    calls: list[cst.BaseExpression] = []
    for s in loop.body.body:
        lines = s.body.body if isinstance(s, cst.If) else [s]
        for line in lines:
            calls.extend(small.value for small in getattr(line, "body", ()) if isinstance(small, cst.Expr))
    return [c for c in calls if isinstance(c, cst.Call)]


def holds_only_calls(block: cst.BaseSuite) -> bool:
    return isinstance(block, cst.IndentedBlock) and all(
        isinstance(s, cst.SimpleStatementLine)
        and all(isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) for small in s.body)
        for s in block.body
    )


def marked_dims(source: SourceFile, call: cst.Call, expr: str) -> list[int]:
    """The dims ``torch._dynamo.mark_dynamic(expr, dims)`` (or maybe_mark_dynamic, mark_unbacked,
    however imported) marks; [] for any other call. ``expr`` without whitespace."""
    func = call.func
    called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if called not in MARK_CALLS or not call.args or squeezed_code(source.code(call.args[0].value)) != expr:
        return []
    dims = next((a.value for a in call.args[1:] if a.keyword is None or a.keyword.value == "index"), None)
    values = dims.elements if isinstance(dims, (cst.List, cst.Tuple)) else [dims]
    found = []
    for value in values:
        if isinstance(value, cst.BaseElement):  # a list or tuple element wraps its value
            value = value.value
        if isinstance(value, cst.Integer):
            found.append(int(value.evaluated_value))
    return found


def is_contiguous_copy(value: cst.BaseExpression) -> bool:
    """``....clone(memory_format=torch.contiguous_format)``: the copy RF001 makes."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "clone"
        and any(
            a.keyword is not None
            and a.keyword.value == "memory_format"
            and isinstance(a.value, (cst.Attribute, cst.Name))
            and (a.value.attr.value if isinstance(a.value, cst.Attribute) else a.value.value) == "contiguous_format"
            for a in value.args
        )
    )


def fresh_name(base: str, taken: set[str]) -> str:
    base = base if base.isidentifier() else "x"
    if base not in taken:
        return base
    n = 1
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def scope_statement(source: SourceFile, node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of ``node``'s function (or of the module) that holds it: where a line runs
    once before the compile, not once per pass of a loop around it (a config line before the
    statement that compiles). None inside a class body or a lambda."""
    statement: cst.CSTNode | None = None
    child: cst.CSTNode = node
    for parent in source.ancestors(node):
        # A def ends the walk where the node is in its body (a model built and compiled in
        # `main()` got its line above `def main`); in its decorators, the def is the statement.
        if isinstance(parent, cst.FunctionDef) and isinstance(child, cst.Decorator):
            statement = child = parent
            continue
        child = parent
        if isinstance(parent, (cst.FunctionDef, cst.Module)):
            return statement
        if isinstance(parent, (cst.ClassDef, cst.Lambda)):
            return None  # a line in a class body binds a class attribute
        if isinstance(parent, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = parent
    return statement


def statement_start(source: SourceFile, statement: cst.CSTNode) -> tuple[int, int]:
    """(line, column) where a line inserted before ``statement`` goes: above its decorators, for
    a decorated ``def`` or ``class`` (libcst's position of one starts at the keyword)."""
    decorators = getattr(statement, "decorators", None) or ()
    pos = source.positions[decorators[0] if decorators else statement]
    return pos.start.line, pos.start.column


def compiled_module(source: SourceFile, node: cst.CSTNode) -> tuple[str, bool] | None:
    """How the code names the module a compile call compiles, and whether that name holds it only
    after the statement: ``model`` of ``torch.compile(model)``, ``torch.compile(model.forward)``
    and ``model.compile()`` (False); the name the compiled module is bound to where the module is
    built in the call, ``model = torch.compile(Bert(cfg).to(device))`` (True: an attribute set
    on the compiled module sets it on the module). None for anything else (a decorated
    function)."""
    if not isinstance(node, cst.Call):
        return None
    if source.qualified_name(node.func) == "torch.compile":
        if not node.args or node.args[0].keyword is not None:
            return None
        expr = node.args[0].value
    elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "compile":
        expr = node.func.value
    else:
        return None
    if isinstance(expr, cst.Attribute) and expr.attr.value == "forward":
        expr = expr.value
    if is_plain_dotted(expr):
        return source.code(expr), False
    parent = source.parents.get(node)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and is_plain_dotted(parent.targets[0].target):
        return source.code(parent.targets[0].target), True
    return None
