"""Reads of a value in project files the Profile did not hash: a profiled file imports them, but
no compile ran through them (a logger module that prints a counter), so a fix that changes the
value's type must know of them."""

from __future__ import annotations

import os

import libcst as cst

from recompile_fix.analysis.cst_names import is_load
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile

__all__ = ["imported_modules", "read_in_unprofiled_imports"]


def read_in_unprofiled_imports(attr: str, files: list[str], project: Project) -> str | None:
    """``file:line (`code`)`` of a read of ``.<attr>``, on any object, in a project file that a
    profiled file imports but the Profile did not hash (no compile ran through it: a logger
    module that prints the counter), or None."""
    profiled = set(files)
    seen: set[str] = set()
    for file in files:
        source = project.source(file)
        if source is None:
            continue
        for module in imported_modules(source):
            for candidate in _module_paths(module, file):
                if candidate in profiled or candidate in seen:
                    continue
                seen.add(candidate)
                other = project.read_only(candidate)
                if other is None or f".{attr}" not in other.text:
                    continue
                for node in other.nodes(cst.Attribute):
                    if node.attr.value == attr and is_load(other, node):
                        line = other.positions[node].start.line
                        return f"`{other.lines[line - 1].strip()}` at {candidate}:{line}"
    return None


def imported_modules(source: SourceFile) -> list[tuple[int, str]]:
    """(level, dotted name) of each module an import statement names: ``import a.b`` (0, "a.b"),
    ``from .c import d`` (1, "c") and (1, "c.d"), ``from e import f`` (0, "e") and (0, "e.f")."""
    found: list[tuple[int, str]] = []
    for node in source.nodes(cst.Import):
        found.extend((0, source.code(alias.name)) for alias in node.names)
    for node in source.nodes(cst.ImportFrom):
        level = len(node.relative)
        base = source.code(node.module) if node.module is not None else ""
        found.append((level, base))
        if not isinstance(node.names, cst.ImportStar):
            found.extend((level, f"{base}.{source.code(a.name)}".strip(".")) for a in node.names)
    return [(level, name) for level, name in found if name]


def _module_paths(module: tuple[int, str], importer: str) -> list[str]:
    """Where the module's file would be in the project: from the root, and beside the importing
    file (a script's own folder is on its import path); relative imports from the importer's."""
    level, name = module
    parts = name.split(".")
    bases = [os.path.dirname(importer)] if level else ["", os.path.dirname(importer)]
    if level > 1:
        bases = [os.path.normpath(os.path.join(bases[0], *[".."] * (level - 1)))]
    paths: list[str] = []
    for base in dict.fromkeys(bases):
        stem = os.path.join(base, *parts) if base not in ("", ".") else os.path.join(*parts)
        paths.extend((stem + ".py", os.path.join(stem, "__init__.py")))
    return paths
