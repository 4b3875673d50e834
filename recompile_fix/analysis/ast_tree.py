"""Reading Python's ``ast`` tree the way the rules need it: children in source order (as libcst
gives them), parents, enclosing classes, a call's arguments as written, dotted names, and the
exact source text of a node.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeAlias

from recompile_fix.analysis.source import Positioned, SourceFile

__all__ = [
    "Def",
    "DEFS",
    "FORS",
    "Loop",
    "arguments",
    "class_name",
    "code_of",
    "dotted",
    "eager_compile",
    "identifiers",
    "in_place",
    "int_value",
    "parameter_receiving",
    "parameters",
    "self_attr",
    "simple_string",
    "Tree",
    "tree_of",
    "unstarred",
]

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


Def: TypeAlias = ast.FunctionDef | ast.AsyncFunctionDef


FORS = (ast.For, ast.AsyncFor)


Loop: TypeAlias = ast.For | ast.AsyncFor


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _first_line(func: Def) -> int:
    return min([func.lineno, *(d.lineno for d in func.decorator_list)])


class _Segment:
    """The nodes of one scope in preorder: the module's, or one def's (the def first), each
    subtree's extent, with a nested def a leaf (its nodes are its own segment's)."""

    __slots__ = ("order", "end")

    def __init__(self, root: ast.AST, tree: "Tree") -> None:
        order: list[ast.AST] = []
        end: list[int] = []  # order[i]'s subtree is order[i:end[i]]
        self.order, self.end = order, end
        index, parents = tree.index, tree.parent
        stack: list[ast.AST | int] = [root]
        while stack:
            node = stack.pop()
            if node.__class__ is int:  # the subtree of order[node] is complete
                end[node] = len(order)
                continue
            i = len(order)
            order.append(node)  # type: ignore[arg-type]
            end.append(i + 1)
            if i and isinstance(node, DEFS):
                index[id(node)] = (self, i)  # a leaf here: its nodes are built when asked for
                tree._leaves.append(node)
                continue
            if i:
                index[id(node)] = (self, i)
            children = _children(node)  # type: ignore[arg-type]
            if children:
                stack.append(i)
                for child in children:
                    parents[id(child)] = node  # type: ignore[assignment]
                children.reverse()
                stack.extend(children)


class Tree:
    """Every node of a module (preorder), each subtree's extent and each node's parent, from a
    pass over the nodes' fields (this runs on every file with a ModuleList in static mode).
    A def's nodes are indexed the first time a walk or a question reaches them: a scan asks about
    a few classes' methods of a model file, and indexing the rest was a third of its time.
    Children come in the order libcst's fields have (a def's decorators after its body, a
    class's bases after its body): it decides which of two sites or notes comes first, and the
    rule's output has always followed it."""

    def __init__(self, module: ast.Module):
        # id(node) -> (the segment it is a node of, its position there); a def is a leaf of its
        # enclosing segment and the first node of its own (``_defs``).
        self.index: dict[int, tuple[_Segment, int]] = {}
        self.parent: dict[int, ast.AST] = {}
        self._defs: dict[int, _Segment] = {}
        self._leaves: list[Def] = []  # the defs met so far (indexed or not)
        self._module = module
        self._top = _Segment(module, self)
        self.index[id(module)] = (self._top, 0)
        self._order: list[ast.AST] | None = None

    @property
    def order(self) -> list[ast.AST]:
        """Every node of the module, in preorder (indexes every def)."""
        if self._order is None:
            self._order = [self._module, *self._span(self._top, 1, len(self._top.order), False)]
        return self._order

    def _segment_of_def(self, func: ast.AST) -> _Segment:
        segment = self._defs.get(id(func))
        if segment is None:
            segment = self._defs[id(func)] = _Segment(func, self)
        return segment

    def _position(self, node: ast.AST) -> tuple[_Segment, int]:
        """Where ``node``'s subtree is: a def's own segment, else its place in its scope's."""
        if isinstance(node, DEFS):
            if id(node) not in self.index and id(node) not in self._defs:
                self._locate(node)
            return self._segment_of_def(node), 0
        return self._leaf_position(node)

    def _locate(self, node: ast.AST) -> None:
        """Index the defs ``node`` lies in (by its lines), where no walk reached it yet (it was
        reached through fields: ``func.body``); all of them where it has no lines."""
        line = getattr(node, "lineno", None)
        while id(node) not in self.index and line is not None:
            around = [
                func
                for func in self._leaves
                if id(func) not in self._defs and _first_line(func) <= line <= (func.end_lineno or 0)
            ]
            if not around:
                break
            for func in around:
                self._segment_of_def(func)
        if id(node) not in self.index:
            for _ in self.order:  # every def indexed
                pass

    def walk(self, root: ast.AST, skip_defs: bool = False) -> Iterator[ast.AST]:
        """Every node under ``root`` (not ``root`` itself), in order; with ``skip_defs``, not into
        nested functions, classes and lambdas."""
        segment, i = self._position(root)
        return self._span(segment, i + 1, segment.end[i], skip_defs)

    def walk_body(self, body: list[ast.stmt], skip_defs: bool = False) -> Iterator[ast.AST]:
        """The statements of a block and every node under them (a block is no node in ast)."""
        first = self._leaf_position(body[0])
        last = self._leaf_position(body[-1])
        return self._span(first[0], first[1], last[0].end[last[1]], skip_defs)

    def _leaf_position(self, node: ast.AST) -> tuple[_Segment, int]:
        """``node``'s place among its siblings (a def's in its enclosing scope, not its own)."""
        if id(node) not in self.index:
            self._locate(node)
        return self.index[id(node)]

    def _span(self, segment: _Segment, i: int, stop: int, skip_defs: bool) -> Iterator[ast.AST]:
        order, end = segment.order, segment.end
        while i < stop:
            node = order[i]
            yield node
            if isinstance(node, _SCOPES):
                if skip_defs:
                    i = end[i]
                    continue
                if isinstance(node, DEFS):
                    inner = self._segment_of_def(node)
                    yield from self._span(inner, 1, len(inner.order), False)
            i += 1

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        if id(node) not in self.parent and node is not self._module:
            self._locate(node)
        parent = self.parent.get(id(node))
        while parent is not None:
            yield parent
            parent = self.parent.get(id(parent))

    def enclosing_class(self, func: Def) -> ast.ClassDef | None:
        for parent in self.ancestors(func):
            if isinstance(parent, ast.ClassDef):
                return parent
            if isinstance(parent, (*DEFS, ast.Lambda)):
                return None
        return None


def tree_of(source: SourceFile) -> Tree:
    """``source``'s Tree, built once: RF004's blocks, its look for a region already written and
    RF007's compile sites all read the same file's (each build is a pass over every node)."""
    tree = source.__dict__.get("_ast_tree")
    if tree is None:
        tree = source.__dict__["_ast_tree"] = Tree(source.syntax)
    return tree


_FIELDS: dict[type, tuple[str, ...]] = {}


# ast shares one Load, Add or Lt object among all its uses, which an index by id() cannot tell
# apart; nothing here asks about them.
_NOT_CHILDREN = {"ctx", "op", "ops"}


# libcst's field order where ast's differs (see Tree).
_LIBCST_ORDER = {
    ast.ClassDef: ("name", "body", "bases", "keywords", "decorator_list", "type_params"),
    ast.ExceptHandler: ("body", "type", "name"),
    ast.match_case: ("pattern", "body", "guard"),
}


def _children(node: ast.AST) -> list[ast.AST]:
    kind = type(node)
    special = _SPECIAL_CHILDREN.get(kind)
    if special is not None:
        return special(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _LIBCST_ORDER.get(kind, kind._fields)
        names = _FIELDS[kind] = tuple(n for n in names if n in kind._fields and n not in _NOT_CHILDREN)
    children: list[ast.AST] = []
    for name in names:
        value = getattr(node, name)
        if type(value) is list:
            if value and isinstance(value[0], ast.AST):  # not a list of names (`global a, b`)
                children += value
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


def _call_children(node: ast.Call) -> list[ast.AST]:
    return [node.func, *_in_source_order(node.args, node.keywords)]


def _dict_children(node: ast.Dict) -> list[ast.AST]:
    children: list[ast.AST] = []
    for key, value in zip(node.keys, node.values):
        if key is not None:  # None: `**other`
            children.append(key)
        children.append(value)
    return children


def _parameter_children(node: ast.arguments) -> list[ast.AST]:
    """Parameters and defaults as libcst orders them: plain, ``*args``, keyword-only, ``**kwargs``,
    positional-only."""
    named = parameters(node)
    plain, kwonly = len(node.posonlyargs), len(node.posonlyargs) + len(node.args)
    children: list[ast.AST] = []
    for arg, default in [
        *named[plain:kwonly],
        (node.vararg, None),
        *named[kwonly:],
        (node.kwarg, None),
        *named[:plain],
    ]:
        if arg is not None:
            children.append(arg)
        if default is not None:
            children.append(default)
    return children


# Each takes the node kind it is listed under.
_SPECIAL_CHILDREN: dict[type[ast.AST], Callable[[Any], list[ast.AST]]] = {
    ast.Call: _call_children,
    ast.Dict: _dict_children,
    ast.arguments: _parameter_children,
}


def _in_source_order(args: list[ast.expr], keywords: list[ast.keyword]) -> list[ast.expr | ast.keyword]:
    """A call's positional and keyword arguments as written (ast lists ``f(a=1, *b)``'s ``*b`` first)."""
    written: list[ast.expr | ast.keyword] = [*args, *keywords]
    if args and keywords and (keywords[0].lineno, keywords[0].col_offset) < (args[-1].lineno, args[-1].col_offset):
        return sorted(written, key=lambda n: (n.lineno, n.col_offset))
    return written


def arguments(call: ast.Call) -> list[tuple[str | None, ast.expr, str]]:
    """A call's arguments as (keyword, value, star), as written: ``*x`` is (None, x, "*"),
    ``**x`` is (None, x, "**")."""
    found: list[tuple[str | None, ast.expr, str]] = []
    for arg in _in_source_order(call.args, call.keywords):
        if isinstance(arg, ast.keyword):
            found.append((arg.arg, arg.value, "" if arg.arg else "**"))
        elif isinstance(arg, ast.Starred):
            found.append((None, arg.value, "*"))
        else:
            found.append((None, arg, ""))
    return found


def parameters(args: ast.arguments) -> list[tuple[ast.arg, ast.expr | None]]:
    """The named parameters (positional-only, plain, keyword-only; not ``*args`` or ``**kwargs``)
    with their defaults."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += args.defaults
    return [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]


def parameter_receiving(func: Def, call: ast.Call, var: str) -> str | None:
    """The parameter of ``func`` that ``call`` passes the name ``var`` to."""
    positional = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
    index = 0
    for keyword, value, star in arguments(call):
        if star:
            return None
        if keyword is not None:
            if isinstance(value, ast.Name) and value.id == var:
                return keyword
            continue
        if isinstance(value, ast.Name) and value.id == var:
            return positional[index] if index < len(positional) else None
        index += 1
    return None


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names; "" for other expressions, so ``f().x`` gives ".x"."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def class_name(node: ast.ClassDef | None) -> str | None:
    return node.name if node is not None else None


def unstarred(node: ast.expr) -> ast.expr:
    return node.value if isinstance(node, ast.Starred) else node


def int_value(node: ast.AST | None) -> int | None:
    """The value of an int literal (not ``True`` / ``False``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def in_place(method: str) -> bool:
    return method.endswith("_") and not method.startswith("_")


def code_of(source: SourceFile, node: Positioned) -> str:
    """A node's text without its own parentheses, which ast counts in a tuple's and a generator
    expression's extent (and nowhere else)."""
    text = source.segment(node)
    if isinstance(node, (ast.Tuple, ast.GeneratorExp)) and _wrapped(text):
        return text[1:-1].strip()
    return text


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of ``text`` that are not layout (an empty list where it does not tokenize)."""
    layout = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        return [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in layout]
    except (tokenize.TokenError, SyntaxError):
        return []


def _wrapped(text: str) -> bool:
    """Is ``text`` one parenthesized whole, ``( ... )`` (not ``(a), (b)``)?"""
    tokens = _tokens(text)
    depth = 0
    for i, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in ("(", "[", "{"):
            depth += 1
        elif token.type == tokenize.OP and token.string in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return tokens[0].string == "(" and i == len(tokens) - 1
    return False


def simple_string(source: SourceFile, node: ast.AST) -> bool:
    """One string literal: not an f-string, nor literals written side by side (``"a" "b"``),
    which ast joins into one constant."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))):
        return False
    return sum(t.type == tokenize.STRING for t in _tokens(f"({source.segment(node)})")) == 1


def eager_compile(source: SourceFile, node: ast.AST) -> bool:
    """``torch.compile(..., backend="eager")`` (or any ``...compile``)."""
    return (
        isinstance(node, ast.Call)
        and dotted(node.func).endswith("compile")
        and any(
            k.arg == "backend"
            and isinstance(k.value, ast.Constant)
            and k.value.value == "eager"
            and simple_string(source, k.value)
            for k in node.keywords
        )
    )


def identifiers(nodes: Iterable[ast.AST]) -> set[str]:
    """The identifiers among ``nodes``: names, attribute and keyword names, parameters, and what a
    def, class, import, ``global`` or ``except ... as`` names."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.keyword, ast.arg)):
            if node.arg:
                found.add(node.arg)
        elif isinstance(node, (*DEFS, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.update(part for part in node.name.split(".") if part != "*")
            if node.asname:
                found.add(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update(node.module.split("."))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
        elif isinstance(node, ast.MatchClass):
            found.update(node.kwd_attrs)
    return found
