"""A parsed source file and the questions the rules ask of it (libcst, positions, torch alias).

Shared by planning (where does the fix go?) and rewriting (what text goes there?). Parsing is
done once per file and kept on the SourceFile.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import symtable
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

import libcst as cst

if TYPE_CHECKING:
    from libcst.metadata import CodeRange

from recompile_fix.analysis.cst_walk import children, dotted_name, walk
from recompile_fix.errors import UserError
from recompile_fix.notebook import source_of
from recompile_fix.profile.files import read_bounded
from recompile_fix.profile.model import Location

__all__ = ["Positioned", "SourceError", "SourceFile"]

_LINE_END = re.compile(r"\r\n|\r|\n")
# The files SourceFile.parse parsed last, by path and text, least recent first: the same library
# file serves every Project a process builds (an editor's server plans on each change; a test plans
# one Profile per release), and a project file read again after its fixes are written is not
# parsed again. Sixteen: a libcst tree of a long file with its positions holds tens of MB, and a
# language server lives long.
_RECENT: dict[tuple[str, str], "SourceFile"] = {}
_RECENT_KEPT = 16
_RECENT_LOCK = threading.Lock()
_BUILTIN_NAMES = set(dir(builtins))


@runtime_checkable
class Positioned(Protocol):
    """An ``ast`` node with a position: a statement, an expression, a parameter, a keyword, ..."""

    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int | None


class SourceError(UserError):
    """A file that cannot be read or parsed: reported for that file alone."""


class SourceFile:
    """One file's text, and its syntax trees made on first use: the ``ast`` tree (about ten
    times cheaper, enough for analyses that only read) and the libcst module (for edits)."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.text = text

    def __repr__(self) -> str:
        return f"SourceFile({str(self.path)!r})"

    @classmethod
    def read(cls, path: Path, data: bytes | None = None, *, parse: bool = True) -> "SourceFile":
        try:
            data = source_of(path, read_bounded(path)) if data is None else data
        except OSError as exc:
            raise SourceError(f"{path}: cannot read: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceError(f"{path}: not UTF-8 (byte {exc.start}); not changed") from None
        return cls.parse(path, text, parse=parse)

    @classmethod
    def parse(cls, path: Path, text: str, *, parse: bool = True) -> "SourceFile":
        """With ``parse=False`` nothing is parsed until a tree is asked for (static scans read
        most files through ``syntax`` alone); a syntax error is then raised there.

        The same path and text as a file parsed lately gives that SourceFile again, its trees and
        positions made (nothing changes them): ``_RECENT``."""
        key = (str(path), text)
        with _RECENT_LOCK:  # the language server plans on a thread of its own
            kept = _RECENT.pop(key, None)
            source = kept or cls(path, text)
            if kept is not None or parse:  # a scan's unparsed reads would only push parses out
                _RECENT[key] = source
                while len(_RECENT) > _RECENT_KEPT:
                    del _RECENT[next(iter(_RECENT))]
        if parse:
            source.module  # noqa: B018 -- parse now, so a bad file fails here
        return source

    @functools.cached_property
    def module(self) -> cst.Module:
        try:
            return cst.parse_module(self.text)
        except cst.ParserSyntaxError as exc:
            raise SourceError(
                f"{self.path}:{exc.raw_line}:{exc.raw_column}: does not parse ({exc.message}); not changed"
            ) from None

    @functools.cached_property
    def syntax(self) -> ast.Module:
        """The ``ast`` tree of the file (positions: 1-based lines, UTF-8 byte columns)."""
        bom = self.text.startswith("\ufeff")  # ast rejects it; libcst and CPython accept it
        try:
            tree = ast.parse(self.text[1:] if bom else self.text, filename=str(self.path))
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None) or 0
            column = getattr(exc, "offset", None) or 0
            raise SourceError(
                f"{self.path}:{line}:{column}: does not parse ({getattr(exc, 'msg', exc)}); not changed"
            ) from None
        if bom:  # columns of line 1 count the mark's three UTF-8 bytes, as in the file
            for node in ast.walk(tree):
                # (an attribute test: isinstance against the runtime Protocol costs 10x per node)
                if not hasattr(node, "end_col_offset"):
                    continue
                positioned = cast(Positioned, node)
                if positioned.lineno == 1:
                    positioned.col_offset += 3
                if positioned.end_lineno == 1 and positioned.end_col_offset is not None:
                    positioned.end_col_offset += 3
        return tree

    # -- metadata ---------------------------------------------------------------------
    @functools.cached_property
    def positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    @functools.cached_property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        """Each node's parent: what libcst's ParentNodeProvider records (every node of each
        node's ``children``), walked directly: about a third of the provider's cost, whose
        visitor calls its hooks on every node."""
        parents: dict[cst.CSTNode, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            node = stack.pop()
            for child in children(node):
                parents[child] = node
                stack.append(child)
        return parents

    @functools.cached_property
    def line_offsets(self) -> list[int]:
        # Python's own line ends only: str.splitlines() also breaks at form feeds and other
        # separators that libcst and LSP treat as part of a line.
        offsets = [0]
        for match in _LINE_END.finditer(self.text):
            offsets.append(match.end())
        if offsets[-1] != len(self.text):
            offsets.append(len(self.text))
        return offsets

    @functools.cached_property
    def lines(self) -> list[str]:
        return [self.text[a:b].rstrip("\r\n") for a, b in zip(self.line_offsets, self.line_offsets[1:])]

    def offset(self, line: int, column: int) -> int:
        """Character offset of a libcst (1-based line, 0-based character column) position."""
        return self.line_offsets[line - 1] + column

    def char_column(self, line: int, byte_column: int) -> int:
        """CPython reports columns in UTF-8 bytes; libcst in characters."""
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.positions[node]
        return self.offset(pos.start.line, pos.start.column), self.offset(pos.end.line, pos.end.column)

    def location_of(self, node: cst.CSTNode, file: str, function: str | None = None) -> Location:
        """Where ``node`` is, as a Finding names it: its whole span in ``file`` (the Profile's spelling)."""
        pos = self.positions[node]
        return Location(
            file=file,
            line=pos.start.line,
            end_line=pos.end.line,
            col=pos.start.column,
            end_col=pos.end.column,
            function=function,
        )

    def code(self, node: cst.CSTNode) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def byte_offset(self, line: int, byte_column: int) -> int:
        """Character offset of an ``ast`` (1-based line, UTF-8 byte column) position."""
        return self.offset(line, self.char_column(line, byte_column))

    def segment(self, node: Positioned) -> str:
        """The source text of an ``ast`` node (``ast.get_source_segment`` re-splits the file on
        every call)."""
        assert node.end_lineno is not None and node.end_col_offset is not None  # ast.parse sets them
        start = self.byte_offset(node.lineno, node.col_offset)
        end = self.byte_offset(node.end_lineno, node.end_col_offset)
        return self.text[start:end]

    # -- queries ----------------------------------------------------------------------
    def nodes(self, kind: type) -> list:
        # Once per kind: each call site's lookup scanned the whole file (a file of 150 compiled
        # functions: 1,052 scans, 61 s).
        cache: dict[type, list] = self.__dict__.setdefault("_nodes_of_kind", {})
        if kind not in cache:
            cache[kind] = [node for node in self.positions if isinstance(node, kind)]
        return list(cache[kind])

    def call_at(
        self,
        line: int,
        col: int | None,
        end_line: int | None,
        end_col: int | None,
        accept: Callable[[cst.Call], bool] | None = None,
    ) -> cst.Call | None:
        """The call expression CPython reported at this span (columns in bytes). Without a span
        that matches (a Profile recorded with PYTHONNODEBUGRANGES=1 names only the line): the one
        call starting on ``line`` that ``accept`` accepts (every call, without ``accept``), and
        None when there are several: the wrong call would get the fix."""
        calls = [n for n in self.nodes(cst.Call) if self.positions[n].start.line == line]
        if col is not None and end_col is not None and end_line is not None:
            start, end = self.char_column(line, col), self.char_column(end_line, end_col)
            for call in calls:
                pos = self.positions[call]
                if (pos.start.column, pos.end.line, pos.end.column) == (start, end_line, end):
                    return call
        if accept is not None:
            calls = [c for c in calls if accept(c)]
        return calls[0] if len(calls) == 1 else None

    def function_def(self, first_line: int, name: str) -> cst.FunctionDef | None:
        """The def a code object came from (``co_firstlineno`` counts decorators)."""
        if "positions" not in self.__dict__:
            # Found by the stdlib's tree, whose defs carry their lines, then taken from libcst's by
            # its rank among the defs of that name: a library file's (transformers'
            # modeling_utils.py) libcst positions cost a third of a second, per file, per run.
            return self._function_def_by_rank(first_line, name)
        for node in self.nodes(cst.FunctionDef):
            if node.name.value != name:
                continue
            pos = self.positions[node]
            lines = {pos.start.line}
            for decorator in node.decorators:
                lines.add(self.positions[decorator].start.line)
            if first_line in lines or self.positions[node.name].start.line == first_line:
                return node
        return None

    def syntax_def(self, first_line: int, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """``function_def``'s def in the stdlib's tree (``co_firstlineno`` counts decorators)."""
        for node in ast.walk(self.syntax):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                if first_line in (node.lineno, *(d.lineno for d in node.decorator_list)):
                    return node
        return None

    def _function_def_by_rank(self, first_line: int, name: str) -> cst.FunctionDef | None:
        ranked = self._defs_by_name
        for rank, lines in enumerate(ranked[0].get(name, ())):
            if first_line in lines:
                found = ranked[1].get(name, [])
                return found[rank] if rank < len(found) else None
        return None

    @functools.cached_property
    def _defs_by_name(self) -> tuple[dict[str, list[set[int]]], dict[str, list[cst.FunctionDef]]]:
        """Each name's defs in the file's order: their lines (the def's and its decorators', from
        the stdlib's tree) and their libcst nodes."""
        lines: dict[str, list[tuple[tuple[int, int], set[int]]]] = {}
        for node in ast.walk(self.syntax):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = {node.lineno, *(d.lineno for d in node.decorator_list)}
                lines.setdefault(node.name, []).append(((node.lineno, node.col_offset), where))
        nodes: dict[str, list[cst.FunctionDef]] = {}
        for statement in self._statement_parents:  # the file's order
            if isinstance(statement, cst.FunctionDef):
                nodes.setdefault(statement.name.value, []).append(statement)
        return {k: [w for _, w in sorted(v, key=lambda e: e[0])] for k, v in lines.items()}, nodes

    @functools.cached_property
    def _statement_parents(self) -> dict[cst.CSTNode, cst.CSTNode | None]:
        """Every statement's enclosing statement (None: the module's), in the file's order: a
        walk of statement bodies only, a small part of ``parents``' cost (a def or a class is
        always a statement)."""
        found: dict[cst.CSTNode, cst.CSTNode | None] = {}

        def visit(statements: Iterable[cst.CSTNode], parent: cst.CSTNode | None) -> None:
            for statement in statements:
                found[statement] = parent
                for block in _blocks(statement):
                    visit(block, statement)

        visit(self.module.body, None)
        return found

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        if "parents" not in self.__dict__ and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            statement: cst.CSTNode | None = self._statement_parents.get(node)
            while statement is not None:  # as below, by statements only
                if isinstance(statement, cst.ClassDef):
                    return statement
                if isinstance(statement, cst.FunctionDef):
                    return None
                statement = self._statement_parents.get(statement)
            if node in self._statement_parents:
                return None
        parent = self.parents.get(node)
        while parent is not None:
            if isinstance(parent, cst.ClassDef):
                return parent
            if isinstance(parent, (cst.FunctionDef, cst.Lambda)) and parent is not node:
                return None
            parent = self.parents.get(parent)
        return None

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parent = self.parents.get(node)
        while parent is not None:
            yield parent
            parent = self.parents.get(parent)

    def statement_of(self, node: cst.CSTNode) -> tuple[cst.CSTNode | None, str | None]:
        """The statement a fix can be inserted before: (statement, None) or (None, why not)."""
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
                return None, "the call is inside a lambda or comprehension"
            conditional = _runs_conditionally(parent, child)
            if conditional:
                return None, (
                    f"the call is {conditional}: a statement before it would run when the call does not "
                    "(a value made there, or a mark read there, on a path that never made it)"
                )
            if isinstance(parent, cst.Assert):
                return None, (
                    "the call is in an `assert`, which `python -O` skips: a statement before it would run "
                    "where the call does not"
                )
            if isinstance(parent, cst.While) and child is parent.test:
                return None, "the call is in a while condition"
            if isinstance(parent, cst.If) and child is parent.test and isinstance(self.parents.get(parent), cst.If):
                return None, "the call is in an elif condition"
            if isinstance(parent, cst.SimpleStatementLine):
                return self._outside_class_body(parent)
            if isinstance(parent, cst.SimpleStatementSuite):
                return None, "the call is in a one-line block"
            if isinstance(parent, (cst.If, cst.For, cst.With, cst.Return)) and not isinstance(child, cst.BaseSuite):
                if isinstance(self.parents.get(parent), (cst.IndentedBlock, cst.Module)):
                    return self._outside_class_body(parent)
            child = parent
        return None, "no enclosing statement"

    def _outside_class_body(self, statement: cst.CSTNode) -> tuple[cst.CSTNode | None, str | None]:
        """(statement, None), or (None, why) where the statement is in a class body (its scope is
        the class: a name bound before it becomes a class attribute)."""
        scope = next(
            (a for a in self.ancestors(statement) if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda))), None
        )
        if isinstance(scope, cst.ClassDef):
            return None, "the call is in a class body: a name bound before it would become a class attribute"
        return statement, None

    def names_in_scope(self, node: cst.CSTNode) -> set[str]:
        """The names a new binding in the function (or module) around ``node`` must avoid: those
        bound or read there, and those a nested function, lambda, comprehension or class reads
        from outside itself (a lambda reading the global ``x`` would read a new local ``x``
        instead); at module level also every global any function reads, and the builtins (a
        module-level ``input`` would shadow the builtin for the whole file)."""
        scope = next((a for a in self.ancestors(node) if isinstance(a, cst.FunctionDef)), self.module)
        known = self._scope_names.get(scope)
        if known is None:  # a visit of the whole scope: once a scope, however many fixes ask
            known = self._scope_names[scope] = frozenset(self._names_in(scope))
        return set(known)  # a fix adds the names it binds

    @functools.cached_property
    def _scope_names(self) -> dict[cst.CSTNode, frozenset[str]]:
        return {}  # libcst nodes hash by identity

    def _names_in(self, scope: cst.CSTNode) -> set[str]:
        names: set[str] = set()

        class Collect(cst.CSTVisitor):
            def visit_Name(self, name: cst.Name) -> None:
                names.add(name.value)

            def visit_FunctionDef(self, func: cst.FunctionDef) -> bool:
                names.add(func.name.value)
                return func is scope

            def visit_ClassDef(self, cls_: cst.ClassDef) -> bool:
                names.add(cls_.name.value)
                return False

            def visit_Lambda(self, lam: cst.Lambda) -> bool:
                return False

        scope.visit(Collect())
        table = self._symbols_of(scope)
        if table is None:  # no symbol table (the file does not compile): every name of the scope
            names.update(n.value for n in walk(scope) if isinstance(n, cst.Name))
        else:
            stack = list(table.get_children())
            while stack:
                inner = stack.pop()
                names.update(s.get_name() for s in inner.get_symbols() if s.is_free() or s.is_global())
                stack.extend(inner.get_children())
        if scope is self.module:
            names |= _BUILTIN_NAMES
        return names

    @functools.cached_property
    def _symbol_table(self) -> symtable.SymbolTable | None:
        try:
            return symtable.symtable(self.text.lstrip("\ufeff"), str(self.path), "exec")
        except (SyntaxError, ValueError):
            return None

    def _symbols_of(self, scope: cst.CSTNode) -> symtable.SymbolTable | None:
        """The symbol table of the module, or of a ``def`` (matched by name and line)."""
        table = self._symbol_table
        if table is None or scope is self.module:
            return table
        assert isinstance(scope, cst.FunctionDef)
        line = self.positions[scope.name].start.line
        stack = [table]
        while stack:
            current = stack.pop()
            if current.get_type() == "function" and current.get_name() == scope.name.value:
                if current.get_lineno() == line:
                    return current
            stack.extend(current.get_children())
        return None

    def statement_indent(self, statement: cst.CSTNode) -> str:
        pos = self.positions[statement]
        return self.lines[pos.start.line - 1][: pos.start.column]

    @functools.cached_property
    def torch_alias(self) -> str | None:
        """The name ``torch`` is bound to at module level (``import torch as th`` -> ``th``)."""
        for statement in self.syntax.body:
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.name == "torch":
                        return alias.asname or "torch"
                    if alias.name.startswith("torch.") and alias.asname is None:
                        return "torch"  # `import torch.nn` binds `torch` too
        return None

    @functools.cached_property
    def torch_imports(self) -> list[str]:
        """Every name bound to the ``torch`` module at module level (``import torch``, ``import
        torch as th``), in order."""
        names = []
        for statement in self.syntax.body:
            if isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.name == "torch" or (alias.name.startswith("torch.") and alias.asname is None):
                        name = alias.asname if alias.name == "torch" and alias.asname else "torch"
                        if name not in names:
                            names.append(name)
        return names

    def torch_name_at(self, line: int) -> str | None:
        """How code inserted on ``line`` names the torch module: the file's own name for it (``th``
        for ``import torch as th``; ``torch`` where it has none, and the import is added), unless
        a parameter or local there shadows it (``def step(x, torch=None)``); then another
        module-level import of torch that nothing shadows there, or None (an alias must be
        imported)."""
        for name in dict.fromkeys([self.torch_alias or "torch", *self.torch_imports]):
            if not self.shadowed_at(line, name):
                return name
        return None

    @functools.cached_property
    def fresh_torch_alias(self) -> str:
        """A module-level name for ``import torch as <name>`` (where a local shadows the file's
        own) that nothing in the file uses, nor its text mentions."""
        used = set(_BUILTIN_NAMES)
        for node in ast.walk(self.syntax):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.arg):
                used.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                used.add(node.name)
        name, n = "_torch", 0
        while name in used or name in self.text:
            n += 1
            name = f"_torch{n}"
        return name

    def shadowed_at(self, line: int, name: str) -> bool:
        """Does ``name``, read on ``line``, name something other than the module's global: a
        parameter or local of the function around it (or of one around that), or a class body's
        own name? Where the file has no symbol table (it does not compile): yes, to be safe."""
        key = (line, name)
        known = self._shadowed.get(key)
        if known is None:
            known = self._shadowed[key] = self._shadowed_at(line, name)
        return known

    @functools.cached_property
    def _shadowed(self) -> dict[tuple[int, str], bool]:
        # asked again for each fix of each set of fixes an editor tries: answered once a line
        return {}

    @functools.cached_property
    def _scopes(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda]:
        """Every function, class and lambda of the file, in source order."""
        scopes = [
            node
            for node in ast.walk(self.syntax)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
        ]
        return sorted(scopes, key=lambda n: (n.lineno, n.col_offset))

    def _shadowed_at(self, line: int, name: str) -> bool:
        table = self._symbol_table
        if table is None:
            return True
        # the scopes around the line, outermost first
        chain = [n for n in self._scopes if n.lineno <= line <= (n.end_lineno or n.lineno)]
        tables = [table]
        for scope in chain:
            found = next(
                (
                    t
                    for t in _children_of(tables[-1])
                    if t.get_lineno() == scope.lineno
                    and (isinstance(scope, ast.Lambda) or t.get_name() == getattr(scope, "name", None))
                ),
                None,
            )
            if found is None:
                return True
            tables.append(found)
        innermost = tables[-1]
        if innermost is table:
            return False
        try:
            symbol = innermost.lookup(name)
        except KeyError:
            symbol = None
        if symbol is not None and (symbol.is_global() or symbol.is_declared_global()):
            return False
        if symbol is not None and symbol.is_local():
            return True
        # Read from outside: a function around it (not a class) that binds it shadows it.
        for outer in reversed(tables[1:-1]):
            if outer.get_type() != "function":
                continue
            try:
                bound = outer.lookup(name)
            except KeyError:
                continue
            if bound.is_global() or bound.is_declared_global():
                return False
            if bound.is_local():
                return True
        return False

    @functools.cached_property
    def imports(self) -> dict[str, str]:
        """Names bound by the file's imports -> what they name: ``F`` -> ``torch.nn.functional``,
        ``Adam`` -> ``torch.optim.Adam``, ``np`` -> ``numpy`` (imports anywhere in the file)."""
        bound: dict[str, str] = {}
        for node in self.nodes(cst.Import):
            for alias in node.names:
                name = dotted_name(alias.name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    bound[alias.asname.name.value] = name
                else:
                    bound.setdefault(name.split(".")[0], name.split(".")[0])
        for node in self.nodes(cst.ImportFrom):
            if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
                continue
            module = dotted_name(node.module)
            for alias in node.names:
                name = dotted_name(alias.name)
                local = alias.asname.name.value if alias.asname is not None else name
                bound[local] = f"{module}.{name}"
        return bound

    def qualified_name(self, node: cst.BaseExpression) -> str:
        """``F.dropout`` -> ``torch.nn.functional.dropout`` through the file's imports; the
        dotted text for names the file does not import; "" for other expressions."""
        dotted = dotted_name(node)
        if not dotted:
            return ""
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        if target is None:
            return dotted
        return f"{target}.{rest}" if rest else target

    def import_insertion_offset(self) -> int:
        """Where ``import torch`` goes when the file lacks it: after the last top-level import
        (or the docstring and ``__future__`` imports)."""
        line = 0
        for index, statement in enumerate(self.syntax.body):
            is_docstring = (
                index == 0
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            )
            if is_docstring or isinstance(statement, (ast.Import, ast.ImportFrom)):
                assert statement.end_lineno is not None  # ast.parse sets it
                line = statement.end_lineno
            else:
                break
        return self.line_offsets[line] if line < len(self.line_offsets) else len(self.text)


def _children_of(table: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    return list(table.get_children())


def _runs_conditionally(parent: cst.CSTNode, child: cst.CSTNode) -> str | None:
    """Does ``child`` run only on some of the evaluations of ``parent`` (a branch of a
    conditional expression, an operand after ``and``/``or``, a comparison after the first)?
    Which, in words, or None."""
    if isinstance(parent, cst.IfExp) and child is not parent.test:
        return "in a branch of a conditional expression (`a if c else b`)"
    if isinstance(parent, cst.BooleanOperation) and child is parent.right:
        return f"after `{parent.operator.__class__.__name__.lower()}`, which may not evaluate it"
    if isinstance(parent, cst.ComparisonTarget) and child is parent.comparator:
        return None  # decided at the Comparison: the first comparator always runs
    if isinstance(parent, cst.Comparison) and any(child is c for c in parent.comparisons[1:]):
        return "in a chained comparison after its first test, which may not evaluate it"
    return None


def _blocks(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """The statement lists a compound statement holds: its body, and ``else``, ``except`` and
    ``finally`` blocks (and each ``except``'s, each ``case``'s body)."""
    blocks: list[Sequence[cst.CSTNode]] = []
    for part in (
        getattr(statement, "body", None),
        getattr(statement, "orelse", None),
        getattr(statement, "finalbody", None),
    ):
        if isinstance(part, (cst.If, cst.Else, cst.Finally)):  # `elif` is an If in orelse
            blocks.append([part] if isinstance(part, cst.If) else part.body.body)
        elif isinstance(part, cst.BaseSuite):
            blocks.append(part.body)
    for handler in getattr(statement, "handlers", ()) or ():
        blocks.append(handler.body.body)
    for case in getattr(statement, "cases", ()) or ():
        blocks.append(case.body.body)
    return [b for b in blocks if isinstance(b, Sequence)]
