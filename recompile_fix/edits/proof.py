"""The proof every rewritten file passes before anything writes it or offers it (``apply``,
``verify``'s copy, ``apply --verify``, the language server's quick fixes and fix-all all get
their text from ``rewrite``, which calls ``prove``).

A fix is a set of Edits. Whatever a rule computed, the new text must:

* be the old text outside the edited spans, byte for byte, and replace only whole nodes
  (an expression or statement the fix is about, whole lines, or layout between them);
* use the file's own line ending in every line it inserts (CRLF, CR or LF);
* compile (the whole file, as CPython compiles it: syntax, ``global``/``nonlocal`` order);
* resolve every name the old text read to the same binding: a name the fix binds must not
  capture a global or builtin that this scope or a nested one (a function, a lambda, a
  comprehension) reads, and a new module-level name must not shadow a builtin or global that
  any scope of the file reads;
* read, in each statement it inserts before the code it is about, names that still hold the
  values they hold there: nothing between the insertion point and that code (an earlier
  statement on the same line, a walrus in an earlier argument) binds them.

``prove`` answers None or one line saying which proof failed.
"""

from __future__ import annotations

import ast
import functools
import re
import symtable
import textwrap
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from recompile_fix.edits.edit import Edit

__all__ = ["FixEdits", "line_ending_at", "prove", "with_line_endings"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class FixEdits:
    """One fix's edits, and where the code it is about starts (a character offset), if known:
    the inserted statements must read there what they read at the insertion point."""

    edits: tuple[Edit, ...]
    anchor: int | None = None


# -- line endings ------------------------------------------------------------------------------
def line_ending_at(text: str, offset: int) -> str:
    """The line ending of the line holding ``offset`` (that of the file's first line when this
    line has none, "\\n" for a file of one line)."""
    match = _LINE_BREAK.search(text, offset)
    if match is None and offset > 0:
        match = _LINE_BREAK.search(text, 0)
    if match is None:
        return "\n"
    if match.group() == "\r" and match.end() < len(text) and text[match.end()] == "\n":
        return "\r\n"  # offset sat between the two characters of a CRLF
    return match.group()


def with_line_endings(text: str, edits: list[Edit]) -> list[Edit]:
    """Edits whose inserted line breaks are the file's own at that point (rules write "\\n")."""
    out = []
    for edit in edits:
        ending = line_ending_at(text, edit.start)
        new_text = _LINE_BREAK.sub(ending, edit.new_text) if _LINE_BREAK.search(edit.new_text) else edit.new_text
        out.append(edit if new_text == edit.new_text else Edit(edit.file, edit.start, edit.end, new_text, edit.rule))
    return out


# -- the proof -----------------------------------------------------------------------------------
def prove(before: str, after: str, edits: Sequence[Edit], fixes: Sequence[FixEdits] = ()) -> str | None:
    """None when ``after`` (``before`` with ``edits``) passes every proof; else why not."""
    why = _check_spans(before, after, edits) or _check_line_endings(before, edits)
    if why:
        return why
    original = _analysed(before)
    if original.error is not None:
        return f"the file does not compile as it is ({original.error}), so no fix can be proven"
    why = _check_replaced_spans(before, original, edits)
    if why:
        return why
    rewritten = _Analysis(after)
    if rewritten.error is not None:
        return f"the fixed file would not compile ({rewritten.error})"
    why = _check_names(original.table, rewritten.table)
    if why:
        return why
    for fix in fixes:
        why = _check_anchor(before, original, fix)
        if why:
            return why
    return _check_names_across_fixes(fixes)


def _check_names_across_fixes(fixes: Sequence[FixEdits]) -> str | None:
    """Two fixes' inserted statements never bind one name at one place (each would read its own
    value; the second overwrites the first)."""
    bound: dict[tuple[int, str], tuple[int, str]] = {}
    for index, fix in enumerate(fixes):
        for edit in fix.edits:
            if edit.start != edit.end or not edit.new_text.strip():
                continue
            try:
                tree = ast.parse(textwrap.dedent(edit.new_text))
            except SyntaxError:
                continue
            for node in tree.body:
                if not isinstance(node, ast.Assign):
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        value = ast.dump(node.value)
                        other, other_value = bound.setdefault((edit.start, target.id), (index, value))
                        if other != index and other_value != value:
                            return f"two fixes bind `{target.id}` before one statement: the second would overwrite the first"
    return None


def _check_spans(before: str, after: str, edits: Sequence[Edit]) -> str | None:
    cursor = 0
    out = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if not 0 <= edit.start <= edit.end <= len(before) or edit.start < cursor:
            return f"an edit ({edit.rule}) spans {edit.start}..{edit.end}, outside the file or over another edit"
        for at in (edit.start, edit.end):
            if 0 < at < len(before) and before[at - 1] == "\r" and before[at] == "\n":
                return f"an edit ({edit.rule}) splits a CRLF line ending"
        gap = before[cursor : edit.start]
        if after[out : out + len(gap)] != gap:
            return "the fixed text differs from the file outside the edited spans"
        out += len(gap) + len(edit.new_text)
        if after[out - len(edit.new_text) : out] != edit.new_text:
            return "the fixed text is not the edits' text"
        cursor = edit.end
    if after[out:] != before[cursor:]:
        return "the fixed text differs from the file outside the edited spans"
    return None


def _check_line_endings(before: str, edits: Sequence[Edit]) -> str | None:
    for edit in edits:
        ending = line_ending_at(before, edit.start)
        for match in _LINE_BREAK.finditer(edit.new_text):
            if match.group() != ending:
                return (
                    f"an inserted line ({edit.rule}) ends with {match.group()!r} in a file whose lines end with "
                    f"{ending!r}"
                )
    return None


# -- compiling and scopes ------------------------------------------------------------------------
class _Analysis:
    """A text compiled as CPython would, its ``ast`` tree and its symbol table."""

    def __init__(self, text: str):
        self.text = text[1:] if text.startswith("\ufeff") else text
        self.bom = len(text) - len(self.text)
        self.error: str | None = None
        self.tree: ast.Module | None = None
        self.table: symtable.SymbolTable | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes and the like: the user's, not ours
                self.tree = ast.parse(self.text)
                compile(self.tree, "<fixed>", "exec", dont_inherit=True)
                self.table = symtable.symtable(self.text, "<fixed>", "exec")
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            self.error = f"line {line}: {getattr(exc, 'msg', exc)}" if line else str(exc)

    @functools.cached_property
    def line_starts(self) -> list[int]:
        starts = [0]
        starts.extend(m.end() for m in _LINE_BREAK.finditer(self.text))
        return starts

    def offset(self, line: int, byte_column: int) -> int:
        """Character offset in the original text (BOM included) of an ``ast`` position."""
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        text = self.text[start:end]
        if text.isascii():
            column = byte_column
        else:
            column = len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))
        return self.bom + start + column

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    @functools.cached_property
    def node_spans(self) -> set[tuple[int, int]]:
        assert self.tree is not None
        return {self.span(n) for n in ast.walk(self.tree) if isinstance(n, (ast.expr, ast.stmt))}


@functools.lru_cache(maxsize=16)
def _analysed(text: str) -> _Analysis:
    """The original text's analysis: the language server proves many fix sets of one text."""
    return _Analysis(text)


def _check_replaced_spans(before: str, original: _Analysis, edits: Sequence[Edit]) -> str | None:
    """An edit that replaces text replaces a whole expression or statement, whole lines, or
    layout (blanks and commas): never part of a node, which would leave the rest dangling."""
    for edit in edits:
        if edit.start == edit.end:
            continue
        replaced = before[edit.start : edit.end]
        if not replaced.strip(" \t\r\n,\\"):
            continue
        whole_lines = (edit.start == 0 or before[edit.start - 1] in "\r\n") and replaced[-1:] in ("\r", "\n")
        if whole_lines or (edit.start, edit.end) in original.node_spans:
            continue
        return f"an edit ({edit.rule}) replaces `{_short(replaced)}`, which is not a whole expression or statement"
    return None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


_Kind = str


def _resolution(symbol: symtable.Symbol) -> _Kind:
    if symbol.is_free():
        return "free"
    if symbol.is_global():
        return "global"
    if symbol.is_local():
        return "local"
    return "unbound"


def _module_bound(table: symtable.SymbolTable) -> set[str]:
    return {
        s.get_name()
        for s in table.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace() or s.is_parameter()
    }


def _global_reads(table: symtable.SymbolTable) -> dict[str, str]:
    """Names some scope reads as a global or builtin -> which scope (the first seen)."""
    reads: dict[str, str] = {}
    stack = [table]
    while stack:
        scope = stack.pop()
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and symbol.is_global():
                where = "module level" if scope.get_type() == "module" else f"`{scope.get_name()}`"
                reads.setdefault(symbol.get_name(), where)
        stack.extend(scope.get_children())
    return reads


def _check_names(before: symtable.SymbolTable | None, after: symtable.SymbolTable | None) -> str | None:
    assert before is not None and after is not None
    new_globals = _module_bound(after) - _module_bound(before)
    if new_globals:
        reads = _global_reads(before)
        for name in sorted(new_globals):
            if name in reads:
                return (
                    f"the fix binds `{name}` at module level, where {reads[name]} reads the "
                    f"{'builtin' if name in _BUILTINS else 'global'} `{name}`"
                )
    return _compare_scopes(before, after)


def _compare_scopes(before: symtable.SymbolTable, after: symtable.SymbolTable) -> str | None:
    for symbol in before.get_symbols():
        name = symbol.get_name()
        try:
            now = after.lookup(name)
        except KeyError:
            continue  # the fix removed every use of it here: nothing left to resolve
        was, is_ = _resolution(symbol), _resolution(now)
        if was != is_ and symbol.is_referenced():
            where = "module level" if before.get_type() == "module" else f"`{before.get_name()}`"
            return f"the fix binds `{name}`, which {where} reads as a {was} name: it would read the new binding instead"
    children = after.get_children()
    index = 0
    for child in before.get_children():
        key = (child.get_type(), child.get_name())
        while index < len(children) and (children[index].get_type(), children[index].get_name()) != key:
            index += 1  # a scope the fix inserted
        if index == len(children):
            return f"the fix removes or renames the scope `{child.get_name()}`"
        why = _compare_scopes(child, children[index])
        if why:
            return why
        index += 1
    return None


_BUILTINS = set(dir(__builtins__)) if not isinstance(__builtins__, dict) else set(__builtins__)


# -- what inserted statements read ---------------------------------------------------------------
def _check_anchor(before: str, original: _Analysis, fix: FixEdits) -> str | None:
    """Statements inserted at P before the code at the anchor A run at P: the names they read
    must not be bound by anything that runs between P and A."""
    if fix.anchor is None or original.tree is None:
        return None
    own: set[str] = set()
    for edit in sorted(fix.edits, key=lambda e: e.start):
        if edit.start != edit.end or not edit.new_text.strip():
            continue
        try:
            inserted = ast.parse(textwrap.dedent(edit.new_text.replace("\r\n", "\n").replace("\r", "\n")))
        except SyntaxError:
            continue  # not statements (a decorator line, keyword arguments): nothing runs early
        reads = {n.id for n in ast.walk(inserted) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        binds = {n.id for n in ast.walk(inserted) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        if edit.start <= fix.anchor:
            for name, line in _bound_between(original, edit.start, fix.anchor):
                if name in reads - own:
                    return (
                        f"the statement the fix inserts reads `{name}`, which line {line} binds between "
                        "the insertion point and the call: it would read another value"
                    )
        own |= binds
    return None


# Nodes that open a scope of their own: bindings inside them are not the enclosing scope's.
_SCOPES_ALL = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _bound_between(analysis: _Analysis, start: int, anchor: int) -> list[tuple[str, int]]:
    """(name, line) of each binding in the scope of ``anchor`` that runs at or after ``start``
    and before the code at ``anchor`` (assignment targets of the statement holding the anchor
    bind after it and do not count)."""
    assert analysis.tree is not None
    scope: ast.AST = analysis.tree
    path: list[ast.AST] = []  # the nodes from the scope down to the anchor
    node: ast.AST = analysis.tree
    while True:
        inner = next(
            (c for c in ast.iter_child_nodes(node) if hasattr(c, "lineno") and _holds(analysis, c, anchor)),
            None,
        )
        if inner is None:
            break
        if isinstance(inner, _SCOPES_ALL):
            scope, path = inner, []
        else:
            path.append(inner)
        node = inner
    after_anchor: set[int] = set()  # targets that bind once the code holding the anchor ran
    for holder in path:
        targets: list[ast.AST] = []
        if isinstance(holder, ast.Assign):
            targets = list(holder.targets)
        elif isinstance(holder, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = [holder.target]
        elif isinstance(holder, (ast.For, ast.AsyncFor)) and _holds(analysis, holder.iter, anchor):
            targets = [holder.target]
        elif isinstance(holder, (ast.With, ast.AsyncWith)):
            targets = [
                i.optional_vars for i in holder.items if i.optional_vars and _holds(analysis, i.context_expr, anchor)
            ]
        for target in targets:
            after_anchor.update(id(n) for n in ast.walk(target))
    found: list[tuple[str, int]] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        current = stack.pop()
        if not hasattr(current, "lineno"):
            stack.extend(ast.iter_child_nodes(current))
            continue
        begin, end = analysis.span(current)
        if end <= start or begin >= anchor:
            continue
        names: list[str] = []
        if isinstance(current, ast.Name) and not isinstance(current.ctx, ast.Load) and id(current) not in after_anchor:
            names = [current.id]
        elif isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [current.name]
        elif isinstance(current, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in current.names]
        elif isinstance(current, ast.ExceptHandler) and current.name:
            names = [current.name]
        if begin >= start:
            found.extend((name, current.lineno) for name in names)
        if not isinstance(current, _SCOPES_ALL):
            stack.extend(ast.iter_child_nodes(current))
    return found


def _holds(analysis: _Analysis, node: ast.AST, offset: int) -> bool:
    begin, end = analysis.span(node)
    return begin <= offset < end
