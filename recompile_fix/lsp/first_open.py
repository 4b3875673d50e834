"""Diagnostics for a file the editor opens before the engine has loaded: the ones the server last
published for the same text, in the same workspace, read from the user's cache.

An editor opens its files right after ``initialized``, while the server still loads pygls,
lsprotocol and the engine (about 0.4 s of imports on one core). ``serve`` reads the messages
that follow ``initialize`` here, before pygls runs: for a ``didOpen`` whose exact text was
analysed before (same buffer text, workspace, options, position encoding, tool code, and
unchanged Profile and pyproject.toml files), it publishes the diagnostics stored then, at once.
The engine's own analysis follows as always and publishes again only where it differs: the
stored answer is a preview that the real one replaces, never the last word (a change in a file
the Profile names, other than this one, shows in that second answer).

Entries live in the user's cache folder (``RECOMPILE_FIX_CACHE_DIR``, else the platform's), one
small JSON file per buffer text, never in the project. Standard library only."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "CACHE_DIR_ENV",
    "cache_dir",
    "context_of_message",
    "file_text",
    "lookup",
    "publish_message",
    "read_until_open",
    "store",
    "workspace_context",
]

CACHE_DIR_ENV = "RECOMPILE_FIX_CACHE_DIR"
_FORMAT = "1"
_MAX_ENTRIES = 500  # pruned back to this many, oldest first, when a store finds 20% more
# Messages an editor sends between ``initialized`` and its first ``didOpen``; anything else ends
# the early reading (a request must not wait for it).
_PASSED_OVER = ("initialized", "workspace/didChangeConfiguration")


def cache_dir() -> Path:
    """The tool's folder in the user's cache (created by ``store``)."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
        return base / "recompile-fix" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "recompile-fix"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "recompile-fix"


def workspace_context(
    folders: list[str], root_uri: str | None, root_path: str | None, options: Any, encoding: str
) -> str:
    """What of ``initialize`` an analysis depends on (the workspace, the options, the position
    encoding), as one string: the same from the raw message and from pygls's parsed one."""
    return json.dumps(
        [sorted(folders), root_uri, root_path if not root_uri else None, options, encoding],
        sort_keys=True,
        default=str,
    )


def context_of_message(params: dict[str, Any], encoding: str) -> str:
    """``workspace_context`` from a raw ``initialize`` request's params."""
    folders = params.get("workspaceFolders")
    uris = [f.get("uri") for f in folders if isinstance(f, dict)] if isinstance(folders, list) else []
    return workspace_context(
        [u for u in uris if isinstance(u, str)],
        params.get("rootUri"),
        params.get("rootPath"),
        params.get("initializationOptions"),
        encoding,
    )


def _entry_path(uri: str, text: str, context: str) -> Path:
    key = hashlib.blake2b(digest_size=16)
    for part in (_FORMAT, uri, context, text):
        key.update(part.encode("utf-8", "surrogatepass"))
        key.update(b"\0")
    return cache_dir() / "lsp" / f"{key.hexdigest()}.json"


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def store(uri: str, text: str, context: str, diagnostics: list[Any], depends_on: list[str]) -> None:
    """Keep ``diagnostics`` (as published, JSON-ready) for this text; ``depends_on``: the files
    besides the buffer the analysis read (the Profile, pyproject.toml), present or not."""
    from recompile_fix.tool_code import code_digest

    path = _entry_path(uri, text, context)
    entry = {
        "code": code_digest(),
        "depends_on": {p: _stamp(p) for p in depends_on},
        "diagnostics": diagnostics,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(entry, out)
        os.replace(tmp, path)
        _prune(path.parent)
    except OSError:
        pass  # a read-only or full cache only costs the next open its head start


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(".json") and not e.name.startswith(".")]
    if len(entries) <= _MAX_ENTRIES * 6 // 5:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for entry in entries[: len(entries) - _MAX_ENTRIES]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


def lookup(uri: str, text: str, context: str) -> list[Any] | None:
    """The diagnostics stored for this text, if every input they came from is unchanged."""
    from recompile_fix.tool_code import code_digest

    try:
        entry = json.loads(_entry_path(uri, text, context).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("code") != code_digest():
        return None
    depends_on, diagnostics = entry.get("depends_on"), entry.get("diagnostics")
    if not isinstance(depends_on, dict) or not isinstance(diagnostics, list):
        return None
    if any(_stamp(p) != stamp for p, stamp in depends_on.items()):
        return None
    return diagnostics


def publish_message(uri: str, version: Any, diagnostics: list[Any]) -> bytes:
    params: dict[str, Any] = {"uri": uri, "diagnostics": diagnostics}
    if isinstance(version, int) and not isinstance(version, bool):
        params["version"] = version
    body = json.dumps({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params})
    data = body.encode("utf-8")
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(data) + data


def read_until_open(stream: BinaryIO, read_message) -> tuple[bytes, dict[str, Any] | None]:
    """The bytes of the messages after ``initialize`` up to and including the first ``didOpen``,
    and that message; reading stops (the message None) at any other message but ``initialized``
    and configuration notifications, and at the end of the stream. ``read_message``:
    early.read_first_message."""
    raw = bytearray()
    while True:
        data, message = read_message(stream)
        raw += data
        if message is None:
            return bytes(raw), None
        method = message.get("method")
        if method == "textDocument/didOpen" and "id" not in message:
            return bytes(raw), message
        if method not in _PASSED_OVER or "id" in message:
            return bytes(raw), None


def file_text(message: dict[str, Any]) -> tuple[str, str, Any] | None:
    """The uri, text and version of a well-formed ``didOpen`` of a ``file:`` document."""
    params = message.get("params")
    doc = params.get("textDocument") if isinstance(params, dict) else None
    if not isinstance(doc, dict):
        return None
    uri, text = doc.get("uri"), doc.get("text")
    if not isinstance(uri, str) or not isinstance(text, str) or not uri.startswith("file:"):
        return None
    return uri, text, doc.get("version")
