"""Classes across the project's files: a name used in one file resolved to the class it names
(defined there, or imported from another file of the project: ``from models.base import Base``,
``from .base import Base``, ``import models.base as mb`` ... ``mb.Base``, ``from .base import *``
as its ``__all__`` allows), its bases followed the
same way, and methods looked up along them. So a verdict such as "is not an nn.Module" is given
only when it is true: a base that cannot be read makes the answer "cannot tell", never "no".

Files are read as they are now (``Project.read_only``): resolving names places no edit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from recompile_fix.analysis.cst_walk import children, dotted_name
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile

__all__ = ["ClassIndex", "ClassRef", "qualified_classes"]

# Bases that make a class an nn.Module without reading torch: everything torch.nn exports that
# is a class (nn.Module, nn.Linear, nn.Sequential, ...).
_TORCH_MODULE_PREFIXES = ("torch.nn.", "nn.")
_NOT_MODULES = frozenset({"object", "dict", "list", "tuple", "str", "int", "float", "Exception", "typing.NamedTuple"})
_MAX_DEPTH = 8


@dataclass(frozen=True)
class ClassRef:
    """A class defined in a project file (``file`` as the Profile spells paths)."""

    file: str
    source: SourceFile
    node: cst.ClassDef

    @property
    def name(self) -> str:
        return self.node.name.value

    def __hash__(self) -> int:
        return hash((self.file, id(self.node)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassRef) and self.file == other.file and self.node is other.node


class ClassIndex:
    """Resolves class names in the project's files, across files."""

    def __init__(self, project: Project):
        self.project = project

    # -- files -------------------------------------------------------------------------------
    def read(self, file: str) -> SourceFile | None:
        """A project file for reading names (hash-checked when the Profile saw it, as it is now
        otherwise)."""
        if self.project.expected_hashes is not None and file in self.project.expected_hashes:
            return self.project.source(file) or self.project.read_only(file)
        return self.project.read_only(file)

    def module_file(self, importer: str, module: str, level: int = 0) -> str | None:
        """The project file ``module`` names when imported from ``importer`` (``level`` leading
        dots for a relative import): ``pkg/mod.py`` or ``pkg/mod/__init__.py``, looked for next
        to the importer, in its parent directories, and at the project root."""
        parts = [p for p in module.split(".") if p]
        directory = os.path.dirname(importer)
        if level:
            for _ in range(level - 1):
                directory = os.path.dirname(directory)
            bases = [directory]
        else:
            bases, here = [], directory
            while True:
                bases.append(here)
                # "" ends a relative path; "/" is its own dirname (a library file's spelling,
                # `/site-packages/...`: it looped for ever, gigabytes of bases).
                if not here or os.path.dirname(here) == here:
                    break
                here = os.path.dirname(here)
        for base in bases:
            stem = os.path.normpath(os.path.join(base, *parts)) if parts else os.path.normpath(base or ".")
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if not os.path.isabs(candidate) and not candidate.startswith("..") and self.read(candidate) is not None:
                    return candidate
        return None

    # -- names -------------------------------------------------------------------------------
    def resolve(self, file: str, expr: cst.BaseExpression | str, depth: int = 0) -> ClassRef | None:
        """The project class ``expr`` (a name or dotted name as written in ``file``) names."""
        source = self.read(file)
        dotted = expr if isinstance(expr, str) else dotted_name(expr)
        if source is None or not dotted or depth > _MAX_DEPTH:
            return None
        head, _, rest = dotted.partition(".")
        if not rest:
            local = _class_named(source.module, head)
            if local is not None:
                return ClassRef(file, source, local)
        for name, module, level, imported in _imports(source):
            if name != head:
                continue
            if imported is None:  # `import pkg.mod as m`: m.Base
                target = self.module_file(file, module, level)
                if target is not None and rest and "." not in rest:
                    return self.resolve(target, rest, depth + 1)
                continue
            target = self.module_file(file, module, level)
            if target is not None:  # `from pkg.mod import Base` (Base may itself be re-exported)
                found = self.resolve(target, imported + (f".{rest}" if rest else ""), depth + 1)
                if found is not None:
                    return found
            submodule = self.module_file(file, f"{module}.{imported}" if module else imported, level)
            if submodule is not None and rest and "." not in rest:  # `from pkg import mod`: mod.Base
                return self.resolve(submodule, rest, depth + 1)
        # `from .base import *`: the name is whatever the last star import that exports it binds
        # (a later one rebinds an earlier one's), as Python runs them.
        for module, level in reversed(list(_star_imports(source))):
            target = self.module_file(file, module, level)
            if target is None or target == file:
                continue
            exported = self.read(target)
            if exported is None or not _exports(exported, head):
                continue
            found = self.resolve(target, dotted, depth + 1)
            if found is not None:
                return found
        return None

    def qualified(self, file: str, expr: cst.BaseExpression) -> str:
        """``nn.Module`` -> ``torch.nn.Module`` through ``file``'s imports (dotted text otherwise)."""
        source = self.read(file)
        return source.qualified_name(expr) if source is not None else dotted_name(expr)

    # -- questions ---------------------------------------------------------------------------
    def is_module(self, ref: ClassRef) -> tuple[bool | None, str]:
        """(True / False / None for "cannot tell", why): is ``ref`` an nn.Module subclass?"""
        return self._is_module(ref, set())

    def _is_module(self, ref: ClassRef, seen: set[ClassRef]) -> tuple[bool | None, str]:
        if ref in seen or len(seen) > _MAX_DEPTH:
            return None, f"`{ref.name}`'s bases go round in a circle"
        seen = seen | {ref}
        unknown = None
        for base in ref.node.bases:
            if base.keyword is not None:
                continue  # metaclass=...
            qualified = self.qualified(ref.file, base.value)
            if qualified.startswith(_TORCH_MODULE_PREFIXES) or qualified in ("Module", "torch.nn.Module"):
                return True, f"`{ref.name}` derives from `{qualified}`"
            found = self.resolve(ref.file, base.value)
            if found is not None:
                verdict, why = self._is_module(found, seen)
                if verdict:
                    return True, f"`{ref.name}` derives from `{found.name}` ({found.file}), and {why}"
                if verdict is None:
                    unknown = why
                continue
            if qualified not in _NOT_MODULES:
                unknown = f"`{ref.name}` derives from `{qualified}`, whose source is not in the project"
        if unknown is not None:
            return None, unknown
        return False, f"`{ref.name}` is not an nn.Module (its bases: {_bases(ref) or 'none'})"

    def mro(self, ref: ClassRef) -> Iterator[ClassRef]:
        """``ref`` and its project bases, depth first (Python's order for single inheritance)."""
        seen: set[ClassRef] = set()
        stack = [ref]
        while stack and len(seen) <= _MAX_DEPTH * 4:
            current = stack.pop(0)
            if current in seen:
                continue
            seen.add(current)
            yield current
            bases = [self.resolve(current.file, b.value) for b in current.node.bases if b.keyword is None]
            stack = [b for b in bases if b is not None] + stack

    def method(self, ref: ClassRef, name: str) -> tuple[ClassRef, cst.FunctionDef] | None:
        """The ``def name`` ``ref`` has, its own or inherited from a project base."""
        for owner in self.mro(ref):
            for statement in owner.node.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return owner, statement
        return None

    def by_qualname(self, file: str, qualname: str) -> ClassRef | None:
        """The class ``qualname`` (its ``__qualname__``: ``Net``, ``Outer.Inner``,
        ``build.<locals>.Net``) defined in ``file``: a class by identity. None when the file has
        no such class, or more than one ``class`` statement of that qualified name (which ran
        cannot be told)."""
        source = self.read(file)
        if source is None:
            return None
        found = qualified_classes(source.module).get(qualname, [])
        return ClassRef(file, source, found[0]) if len(found) == 1 else None

    def enclosing(self, file: str, source: SourceFile, node: cst.CSTNode) -> ClassRef | None:
        cls = source.enclosing_class(node)
        return ClassRef(file, source, cls) if cls is not None else None


def _class_named(module: cst.Module, name: str) -> cst.ClassDef | None:
    """The module-level ``class name``: of several, the last, which Python leaves bound."""
    found = None
    for statement in module.body:
        if isinstance(statement, cst.ClassDef) and statement.name.value == name:
            found = statement
    return found


def qualified_classes(module: cst.Module) -> dict[str, list[cst.ClassDef]]:
    """Every ``class`` statement of a file by the ``__qualname__`` Python gives it (``Outer.Inner``,
    ``build.<locals>.Net``; under ``if``/``try``/``with`` as at the top), in file order."""
    found: dict[str, list[cst.ClassDef]] = {}

    def visit(node: cst.CSTNode, prefix: str) -> None:
        for child in children(node):
            if isinstance(child, cst.ClassDef):
                qualname = prefix + child.name.value
                found.setdefault(qualname, []).append(child)
                visit(child.body, qualname + ".")
            elif isinstance(child, cst.FunctionDef):
                visit(child.body, f"{prefix}{child.name.value}.<locals>.")
            elif isinstance(child, cst.BaseStatement | cst.BaseSuite | cst.BaseCompoundStatement):
                visit(child, prefix)
            elif isinstance(child, (cst.ExceptHandler, cst.ExceptStarHandler, cst.Else, cst.Finally, cst.MatchCase)):
                visit(child, prefix)

    visit(module, "")
    return found


def _imports(source: SourceFile) -> Iterator[tuple[str, str, int, str | None]]:
    """(bound name, module, relative level, imported name or None for a module import)."""
    for node in source.nodes(cst.Import):
        for alias in node.names:
            module = dotted_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, module, 0, None
            else:
                yield module.split(".")[0], module.split(".")[0], 0, None
    for node in source.nodes(cst.ImportFrom):
        if isinstance(node.names, cst.ImportStar):
            continue
        module = dotted_name(node.module) if node.module is not None else ""
        for alias in node.names:
            name = dotted_name(alias.name)
            local = (
                alias.asname.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                else name
            )
            yield local, module, len(node.relative), name


def _star_imports(source: SourceFile) -> Iterator[tuple[str, int]]:
    """(module, relative level) of each top-level ``from module import *``, in file order."""
    for statement in source.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for node in statement.body:
            if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
                yield (dotted_name(node.module) if node.module is not None else ""), len(node.relative)


def _exports(source: SourceFile, name: str) -> bool:
    """Does ``from <this file> import *`` bind ``name``? Its literal ``__all__`` says (assigned,
    or extended with ``+=``); without one, every name not starting with an underscore. An
    ``__all__`` that is not a literal list or tuple of strings cannot be read: any public name."""
    listed: set[str] = set()
    found = False
    for statement in source.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for node in statement.body:
            if isinstance(node, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == "__all__" for t in node.targets
            ):
                names = _literal_names(node.value)
                if names is None:
                    return not name.startswith("_")
                found, listed = True, set(names)
            elif (
                isinstance(node, cst.AugAssign)
                and isinstance(node.target, cst.Name)
                and node.target.value == "__all__"
                and isinstance(node.operator, cst.AddAssign)
            ):
                names = _literal_names(node.value)
                if names is None:
                    return not name.startswith("_")
                listed |= set(names)
    return name in listed if found else not name.startswith("_")


def _literal_names(value: cst.BaseExpression) -> list[str] | None:
    if not isinstance(value, (cst.List, cst.Tuple)):
        return None
    names = []
    for element in value.elements:
        if not isinstance(element.value, cst.SimpleString):
            return None
        text = element.value.evaluated_value
        if not isinstance(text, str):
            return None
        names.append(text)
    return names


def _bases(ref: ClassRef) -> str:
    return ", ".join(f"`{ref.source.code(b.value)}`" for b in ref.node.bases if b.keyword is None)
