"""The first file an editor opens, analysed before pygls and lsprotocol are loaded.

An editor opens its files the moment ``initialize`` is answered; pygls and lsprotocol take about
0.3 s to import, the engine less than a third of that without libcst (which the command line
also defers: cli/deferred_imports.py). ``serve`` therefore loads the engine first, on its
loading thread, and pygls after; a ``didOpen`` whose text no server analysed before (else
lsp/first_open.py has its diagnostics) is analysed here, by the engine the session then keeps,
exactly as ``server._run_analysis`` would (the same project root, options and position
encoding), and its diagnostics are published as the server publishes them
(``items.diagnostic_json``). The server's own analysis of that text answers from the engine's
cache and publishes only where it differs.

Nothing here may take the session down: any failure leaves the file to the server."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FirstAnalysis", "analyze", "project_root", "workspace_roots"]

log = logging.getLogger("recompile_fix.lsp")


@dataclass
class FirstAnalysis:
    root: Path  # the project root, as ``project_root`` chose it
    engine: Any  # lsp.engine.Engine (imported where it is needed: the loading thread has it)
    diagnostics: list[dict[str, Any]]  # as published


def workspace_roots(params: dict[str, Any]) -> list[Path]:
    """The workspace's roots from a raw ``initialize`` request, as ``server._initialize`` takes
    them from pygls's parsed one (its folders, then rootUri, else rootPath)."""
    from pygls.uris import to_fs_path  # standard library only: not pygls's server

    roots: list[str | None] = []
    folders = params.get("workspaceFolders")
    for folder in folders if isinstance(folders, list) else []:
        uri = folder.get("uri") if isinstance(folder, dict) else None
        if isinstance(uri, str):
            roots.append(to_fs_path(uri))
    root_uri, root_path = params.get("rootUri"), params.get("rootPath")
    if isinstance(root_uri, str) and root_uri:
        roots.append(to_fs_path(root_uri))
    elif isinstance(root_path, str):
        roots.append(root_path)
    return [Path(r).resolve() for r in roots if r]


def project_root(roots: list[Path], file: Path) -> Path:
    """The project ``file`` belongs to: the innermost workspace folder holding it, else the
    nearest directory with a Profile or a pyproject.toml, else its own directory."""
    file = file.resolve()
    inside = [r for r in roots if r == file or r in file.parents]
    if inside:
        return max(inside, key=lambda r: len(r.parts))
    return next(
        (d for d in file.parents if (d / ".recompile-fix").is_dir() or (d / "pyproject.toml").is_file()),
        file.parent,
    )


_MAX_CHARS = 200_000  # a larger file is left to the server: nothing may wait seconds for its parse


def analyze(params: dict[str, Any], uri: str, text: str, encoding: str) -> FirstAnalysis | None:
    """The diagnostics of the opened ``uri`` (text ``text``), and the engine that found them;
    None where the server must do it (not a file, a large file, or anything failed)."""
    if len(text) > _MAX_CHARS:
        return None
    try:
        from pygls.uris import to_fs_path

        from recompile_fix.lsp.engine import Engine
        from recompile_fix.lsp.items import diagnostic_json

        path = to_fs_path(uri)
        if path is None:
            return None
        options = params.get("initializationOptions")
        profile = options.get("profile") if isinstance(options, dict) else None
        root = project_root(workspace_roots(params), Path(path))
        engine = Engine(root, profile=profile, encoding=encoding)
        analysis = engine.analyze(engine.relative(path), text)
        return FirstAnalysis(root, engine, [diagnostic_json(i) for i in analysis.items])
    except Exception:  # noqa: BLE001 - the server analyses it as always
        log.debug("first analysis failed", exc_info=True)
        return None
