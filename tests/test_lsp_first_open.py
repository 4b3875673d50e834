"""A file opened at once gets its diagnostics before pygls runs: the ones kept for its text
(recompile_fix/lsp/first_open.py), only while everything they came from is unchanged, else the
engine's own (recompile_fix/lsp/first_analysis.py), the same as the server publishes once it
runs. Raw JSON-RPC over a spawned server's pipes, as an editor speaks it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from golden_cases import GOLDEN
from lsp_client import RawClient
from recompile_fix.lsp import first_open

CASE = GOLDEN / "RF002" / "range_count"  # a program with an RF002 finding, and its Profile
# A client that lets the server watch files: the server asks for it (client/registerCapability)
# as soon as pygls has run ``initialized``, so a publish before that request came before pygls.
CAPABILITIES = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
KEPT_MARK = "kept by an earlier server"  # what the tests write into the kept diagnostics


def _open(root: Path, text: str, *, at_once: bool = True) -> tuple[list[str], dict]:
    """A session whose file is opened right after ``initialized`` (``at_once``), or once pygls
    runs (a request first, which ends the server's early reading, then its answer): the methods
    the server sent up to the file's first diagnostics, and those diagnostics."""
    server = RawClient(root)
    try:
        params = {"processId": None, "rootUri": root.as_uri(), "capabilities": CAPABILITIES}
        server.send({"id": 1, "method": "initialize", "params": params})
        server.send({"method": "initialized", "params": {}})
        uri = (root / "program.py").as_uri()
        seen = []
        if not at_once:
            position = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
            server.send({"id": 2, "method": "textDocument/hover", "params": position})
            while not seen or seen[-1].get("id") != 2:
                seen.append(server.receive())
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        server.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
        seen += server.until("textDocument/publishDiagnostics")
    finally:
        server.close()
    assert seen[-1]["params"]["uri"] == uri and seen[-1]["params"]["version"] == 1
    return [m.get("method", "response") for m in seen], seen[-1]["params"]


def _before_pygls(methods: list[str]) -> bool:
    return "client/registerCapability" not in methods


def _mark_kept(tmp_path: Path) -> None:
    """Every kept entry's messages replaced: a publish that shows it came from the entry."""
    for entry in (tmp_path / "cache" / "lsp").glob("*.json"):
        data = json.loads(entry.read_text())
        for diagnostic in data["diagnostics"]:
            diagnostic["message"] = KEPT_MARK
        entry.write_text(json.dumps(data))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv(first_open.CACHE_DIR_ENV, str(tmp_path / "cache"))  # the servers inherit it
    root = tmp_path / "project"
    (root / ".recompile-fix").mkdir(parents=True)
    shutil.copy(CASE / "program.in.py", root / "program.py")
    shutil.copy(CASE / "profile.json", root / ".recompile-fix" / "profile.json")
    return root


@pytest.mark.slow  # language servers, one after the other: seconds, no torch
def test_a_first_open_is_analysed_before_pygls_runs_as_the_server_analyses_it(project, tmp_path):
    text = (project / "program.py").read_text()
    methods, early = _open(project, text)
    assert _before_pygls(methods)  # nothing kept yet: lsp/first_analysis answered
    assert [d["code"] for d in early["diagnostics"]] == ["RF002"]
    kept = list((tmp_path / "cache" / "lsp").glob("*.json"))
    assert len(kept) == 1  # kept by the server, in the user's cache, not the project
    shutil.rmtree(tmp_path / "cache")
    methods, served = _open(project, text, at_once=False)
    assert not _before_pygls(methods) and served == early

    # No Profile: the static rules alone, before pygls too.
    shutil.rmtree(project / ".recompile-fix")
    methods, static = _open(project, text)
    assert _before_pygls(methods) and static["diagnostics"] == []


@pytest.mark.slow
def test_a_reopened_text_gets_the_kept_diagnostics_only_while_its_inputs_are_unchanged(project, tmp_path):
    text = (project / "program.py").read_text()
    _, analysed = _open(project, text)
    _mark_kept(tmp_path)
    methods, again = _open(project, text)
    assert _before_pygls(methods)
    assert [d["message"] for d in again["diagnostics"]] == [KEPT_MARK]  # from the kept entry

    # Another text, or the same text after a new Profile: analysed, as on a first open.
    _, edited = _open(project, text + "\n# edited\n")
    assert [d["message"] for d in edited["diagnostics"]] != [KEPT_MARK]
    profile = project / ".recompile-fix" / "profile.json"
    profile.write_text(profile.read_text() + "\n")
    _, renewed = _open(project, text)
    assert renewed == analysed


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


def test_the_first_analysis_writes_diagnostics_as_the_server_does(tmp_path):
    """``items.diagnostic_json`` (what lsp/first_analysis publishes before lsprotocol is loaded)
    is what pygls's converter writes for the server's own Diagnostic, on a case of every rule
    and on the stale-Profile note (no rule)."""
    from recompile_fix.lsp.engine import Engine
    from recompile_fix.lsp.items import Item, diagnostic_json
    from recompile_fix.lsp.server import _to_diagnostic, build_server

    converter = build_server().protocol._converter
    items = [Item(None, None, ((0, 0), (0, 3)), "stale", "information", {"kind": "stale"})]
    for rule in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        case = next(c for c in sorted(rule.iterdir()) if (c / "profile.json").is_file())
        root = tmp_path / rule.name
        (root / ".recompile-fix").mkdir(parents=True)
        shutil.copy(case / "program.in.py", root / "program.py")
        shutil.copy(case / "profile.json", root / ".recompile-fix" / "profile.json")
        items += Engine(root).analyze("program.py", (root / "program.py").read_text()).items
    assert len({i.rule for i in items}) >= 10
    for item in items:
        assert converter.unstructure(_to_diagnostic(item)) == diagnostic_json(item)


_FIRST_ANALYSIS = """\
import json, sys
from recompile_fix.cli.deferred_imports import defer_heavy, is_loaded
defer_heavy()  # as `recompile-fix lsp` starts
from recompile_fix.lsp import first_analysis
root = sys.argv[1]
uri = "file://" + root + "/program.py"
params = {"rootUri": "file://" + root, "capabilities": {}}
with open(root + "/program.py", encoding="utf-8") as source:
    found = first_analysis.analyze(params, uri, source.read(), "utf-16")
print(json.dumps({"diagnostics": found.diagnostics, "libcst": is_loaded("libcst")}))
"""


@pytest.mark.slow  # one profile run (torch)
def test_after_profile_the_first_open_is_diagnosed_from_what_profile_found(tmp_path):
    """`recompile-fix profile` finds what the rules find from its Profile and keeps it (the
    derived cache), so the editor's first analysis of a profiled file reads it: libcst is never
    loaded, and the diagnostics are the ones planning them afresh gives."""
    from conftest import run_cli

    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(CASE / "program.in.py", root / "program.py")
    run_cli("profile", "--backend", "eager", "--", sys.executable, "program.py", cwd=root, check=0)
    assert (root / ".recompile-fix" / "cache" / "derived.json").is_file()

    def first_analysis() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_ANALYSIS, str(root)], capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    ahead = first_analysis()
    assert [d["code"] for d in ahead["diagnostics"]] == ["RF002"] and not ahead["libcst"]
    shutil.rmtree(root / ".recompile-fix" / "cache")
    afresh = first_analysis()
    assert afresh["libcst"] and afresh["diagnostics"] == ahead["diagnostics"]


def test_a_committed_profile_is_planned_once_and_kept_then(tmp_path):
    """A clone whose Profile was committed has no derived cache: the editor's first analysis
    plans it (libcst loads) and keeps what it found, as `apply` would, so the next session reads
    it (libcst never loads) and diagnoses the same. Found over an unsaved buffer, nothing is kept."""
    from recompile_fix.lsp.engine import Engine

    root = tmp_path / "project"
    (root / ".recompile-fix").mkdir(parents=True)
    shutil.copy(CASE / "program.in.py", root / "program.py")
    shutil.copy(CASE / "profile.json", root / ".recompile-fix" / "profile.json")
    derived = root / ".recompile-fix" / "cache" / "derived.json"

    profiled = (root / "program.py").read_text()
    (root / "program.py").write_text(profiled.replace("(1, 2, 3, 4)", "(1, 2, 3, 5)"))
    Engine(root).analyze("program.py", profiled)  # a buffer the file on disk is not
    assert not derived.exists()
    (root / "program.py").write_text(profiled)

    def first_analysis() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_ANALYSIS, str(root)], capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    planned = first_analysis()
    assert [d["code"] for d in planned["diagnostics"]] == ["RF002"] and planned["libcst"]
    assert derived.is_file()
    again = first_analysis()
    assert not again["libcst"] and again["diagnostics"] == planned["diagnostics"]


def test_a_large_file_is_left_to_the_server(tmp_path):
    """Nothing may wait on a long parse before pygls runs: a file over the limit is not analysed
    early (the server analyses it on its worker, answering other requests meanwhile)."""
    from recompile_fix.lsp import first_analysis

    (tmp_path / "big.py").write_text("")
    params = {"rootUri": tmp_path.as_uri(), "capabilities": {}}
    uri = (tmp_path / "big.py").as_uri()
    small = first_analysis.analyze(params, uri, "x = 1\n", "utf-16")
    assert small is not None and small.diagnostics == [] and small.root == tmp_path.resolve()
    big = "x = 1\n" * (first_analysis._MAX_CHARS // 6 + 1)
    assert first_analysis.analyze(params, uri, big, "utf-16") is None
