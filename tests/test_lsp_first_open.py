"""A file opened at once gets the diagnostics kept for its text (recompile_fix/lsp/first_open.py)
before pygls runs, only while everything they came from is unchanged. Raw JSON-RPC over a spawned
server's pipes, as an editor speaks it."""

import os
import shutil
import sys
from pathlib import Path

import pytest

from golden_cases import GOLDEN
from lsp_client import RawClient
from recompile_fix.lsp import first_open

CASE = GOLDEN / "RF002" / "range_count"  # a program with an RF002 finding, and its Profile
# A client that lets the server watch files: the server asks for it (client/registerCapability)
# as soon as pygls has run ``initialized``, so a publish before that request came from first_open.
CAPABILITIES = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}


def _open_at_once(root: Path, text: str) -> tuple[list[str], dict]:
    """A session whose file is opened right after ``initialized``: the methods the server sent
    up to the file's first diagnostics, and those diagnostics."""
    server = RawClient(root)
    try:
        params = {"processId": None, "rootUri": root.as_uri(), "capabilities": CAPABILITIES}
        server.send({"id": 1, "method": "initialize", "params": params})
        server.send({"method": "initialized", "params": {}})
        uri = (root / "program.py").as_uri()
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        server.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
        seen = server.until("textDocument/publishDiagnostics")
    finally:
        server.close()
    assert seen[-1]["params"]["uri"] == uri and seen[-1]["params"]["version"] == 1
    return [m.get("method", "response") for m in seen], seen[-1]["params"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv(first_open.CACHE_DIR_ENV, str(tmp_path / "cache"))  # the servers inherit it
    root = tmp_path / "project"
    (root / ".recompile-fix").mkdir(parents=True)
    shutil.copy(CASE / "program.in.py", root / "program.py")
    shutil.copy(CASE / "profile.json", root / ".recompile-fix" / "profile.json")
    return root


@pytest.mark.slow  # two language servers, one after the other: seconds, no torch
def test_a_reopened_text_gets_the_kept_diagnostics_before_pygls_runs(project, tmp_path):
    text = (project / "program.py").read_text()
    first, analysed = _open_at_once(project, text)
    assert first.index("client/registerCapability") < first.index("textDocument/publishDiagnostics")
    assert [d["code"] for d in analysed["diagnostics"]] == ["RF002"]
    kept = list((tmp_path / "cache" / "lsp").glob("*.json"))
    assert len(kept) == 1  # in the user's cache, not the project

    again, early = _open_at_once(project, text)
    assert "client/registerCapability" not in again  # published before pygls ran `initialized`
    assert early == analysed

    # Another text, or the same text after a new Profile: analysed first, as on a first open.
    edited, _ = _open_at_once(project, text + "\n# edited\n")
    assert edited.index("client/registerCapability") < edited.index("textDocument/publishDiagnostics")
    profile = project / ".recompile-fix" / "profile.json"
    profile.write_text(profile.read_text() + "\n")
    renewed, answer = _open_at_once(project, text)
    assert renewed.index("client/registerCapability") < renewed.index("textDocument/publishDiagnostics")
    assert answer == analysed


def _kept(tmp_path, monkeypatch, depends_on):
    monkeypatch.setenv(first_open.CACHE_DIR_ENV, str(tmp_path / "cache"))
    context = first_open.workspace_context(["file:///w"], None, None, {"profile": "p.json"}, "utf-16")
    diagnostics = [{"range": {}, "message": "m", "code": "RF001"}]
    first_open.store("file:///w/a.py", "x = 1\n", context, diagnostics, [str(p) for p in depends_on])
    return context, diagnostics


def test_kept_diagnostics_are_given_only_for_the_same_inputs(tmp_path, monkeypatch):
    dependency = tmp_path / "profile.json"
    dependency.write_text("{}")
    absent = tmp_path / "pyproject.toml"
    context, diagnostics = _kept(tmp_path, monkeypatch, [dependency, absent])
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) == diagnostics
    assert first_open.lookup("file:///w/a.py", "x = 2\n", context) is None
    assert first_open.lookup("file:///w/b.py", "x = 1\n", context) is None
    other = first_open.workspace_context(["file:///w"], None, None, {"profile": "p.json"}, "utf-8")
    assert first_open.lookup("file:///w/a.py", "x = 1\n", other) is None

    absent.write_text("[tool.recompile-fix]\n")  # a configuration that was not there
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) is None
    absent.unlink()
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) == diagnostics
    dependency.write_text('{"frames": []}')  # a new Profile
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) is None


def test_kept_diagnostics_never_outlive_the_code_that_made_them(tmp_path, monkeypatch):
    context, diagnostics = _kept(tmp_path, monkeypatch, [])
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) == diagnostics
    monkeypatch.setattr("recompile_fix.tool_code.code_digest", lambda: "edited")
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) is None


def test_a_broken_cache_is_a_miss_and_the_cache_stays_small(tmp_path, monkeypatch):
    context, _ = _kept(tmp_path, monkeypatch, [])
    (entry,) = (tmp_path / "cache" / "lsp").glob("*.json")
    entry.write_text("{not json")
    assert first_open.lookup("file:///w/a.py", "x = 1\n", context) is None
    monkeypatch.setattr(first_open, "_MAX_ENTRIES", 5)
    for n in range(5):
        first_open.store(f"file:///w/{n}.py", "", context, [], [])
    assert len(list(entry.parent.glob("*.json"))) == 6  # pruned only past 20% over
    first_open.store("file:///w/5.py", "", context, [], [])
    kept = sorted(entry.parent.glob("*.json"), key=os.path.getmtime)
    assert len(kept) == 5


def test_the_cache_folder_follows_the_platform(monkeypatch, tmp_path):
    monkeypatch.delenv(first_open.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "platform", "linux")
    assert first_open.cache_dir() == tmp_path / "recompile-fix"
    monkeypatch.setenv(first_open.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert first_open.cache_dir() == tmp_path / "mine"
