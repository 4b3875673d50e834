"""`recompile-fix lsp` end to end: the server runs as `python -m recompile_fix lsp` and a
pytest-lsp client talks to it over stdio, as an editor would.

Edits coming back from the server are applied here by a small client-side applier written
independently of the server's (UTF-16 positions, LSP order for insertions at one point)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

import lsp_forkserver
from conftest import run_cli
from golden_cases import CASES as GOLDEN_CASES
from golden_cases import GOLDEN

CASES = [c.path for c in GOLDEN_CASES if c.changes]
UNSAFE_CASES = {c.path for c in GOLDEN_CASES if c.unsafe_fixes}
STALE = "Profile is stale for this file: run `recompile-fix profile` again"
TIMEOUT = 60


# -- the client side --------------------------------------------------------------------------
def _client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # every publishDiagnostics, in order
    client.arrived = asyncio.Event()

    def publish(ls, params: lsp.PublishDiagnosticsParams):
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)
        client.arrived.set()

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    return client


@asynccontextmanager
async def session(
    root: Path,
    *,
    debounce: float = 0.05,
    capabilities: lsp.ClientCapabilities | None = None,
    options: dict | None = None,
    folders: list[Path] | None = None,
    fresh: bool = False,
):
    """A server for ``root``: forked from this process's preloaded one (tests/lsp_forkserver.py:
    the same server, without the half second of imports), or ``fresh``, spawned as an editor
    spawns it."""
    args = ["lsp", "--debounce", str(debounce)]
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "recompile_fix", *args] if fresh else lsp_forkserver.command(args),
        client_factory=_client,
    )
    client = await config.start()
    try:
        await client.initialize_session(
            lsp.InitializeParams(
                capabilities=capabilities or lsp.ClientCapabilities(),
                root_uri=from_fs_path(str(root)),
                workspace_folders=[lsp.WorkspaceFolder(uri=uri_of(f), name=f.name) for f in folders or []] or None,
                initialization_options=options,
            )
        )
        yield client
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)  # the server exits when asked
    finally:
        server = client._server
        if server is not None and server.returncode is None:  # a failed test: do not wait for it
            server.kill()
        await client.stop()


def uri_of(path: Path) -> str:
    return from_fs_path(str(path))


async def diagnostics_for(client, uri: str, version: int) -> list[lsp.Diagnostic]:
    """Wait for the diagnostics the server publishes for this version of the document."""

    async def wait():
        while True:
            for params in client.published:
                if params.uri == uri and params.version == version:
                    return list(params.diagnostics)
            client.arrived.clear()
            await client.arrived.wait()

    return await asyncio.wait_for(wait(), TIMEOUT)


async def until(client, predicate) -> None:
    """Wait until a publishDiagnostics makes ``predicate()`` true."""

    async def wait():
        while not predicate():
            client.arrived.clear()
            await client.arrived.wait()

    await asyncio.wait_for(wait(), TIMEOUT)


def open_doc(client, path: Path, text: str, version: int = 1) -> str:
    uri = uri_of(path)
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )
    return uri


def change_doc(client, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def code_actions(client, uri: str, rng: lsp.Range | None = None, only=None) -> list[lsp.CodeAction]:
    rng = rng or lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=10**6, character=0))
    result = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=rng,
            context=lsp.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return [a for a in (result or []) if isinstance(a, lsp.CodeAction)]


def _offset(text: str, position: lsp.Position) -> int:
    """An LSP position (UTF-16 code units) to a str offset, written apart from the server's."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = line.encode("utf-16-le")[: 2 * position.character]
    return start + len(units.decode("utf-16-le"))


def apply_workspace_edit(text: str, uri: str, edit: lsp.WorkspaceEdit) -> str:
    if edit.document_changes:
        edits = [e for change in edit.document_changes if change.text_document.uri == uri for e in change.edits]
    else:
        edits = list((edit.changes or {}).get(uri, []))
    spans = [(_offset(text, e.range.start), _offset(text, e.range.end), i, e.new_text) for i, e in enumerate(edits)]
    spans.sort(key=lambda s: (s[0], s[1], s[2]))  # LSP: array order for inserts at one position
    for (_, end, _, _), (next_start, _, _, _) in zip(spans, spans[1:]):
        assert end <= next_start, "overlapping TextEdits"
    for start, end, _, new in reversed(spans):
        text = text[:start] + new + text[end:]
    return text


def ours(diagnostics) -> list[lsp.Diagnostic]:
    return [d for d in diagnostics if d.source == "recompile-fix"]


def rf001(diagnostics) -> list[lsp.Diagnostic]:
    """RF001's diagnostics (other rules may have something to say about these programs too)."""
    return [d for d in diagnostics if d.source == "recompile-fix" and d.code == "RF001"]


def safe_quick_fix(actions) -> lsp.CodeAction | None:
    return quick_fix(actions, unsafe=False)


def stage(case: Path, work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(case / "program.in.py", work / "program.py")
    for extra in case.glob("*.py"):
        if extra.name not in ("program.in.py", "program.out.py"):
            shutil.copy(extra, work / extra.name)
    for package in case.glob("*/__init__.py"):  # a package of the program's (imported, not rewritten)
        shutil.copytree(package.parent, work / package.parent.name, ignore=shutil.ignore_patterns("__pycache__"))
    (work / ".recompile-fix").mkdir(exist_ok=True)
    shutil.copy(case / "profile.json", work / ".recompile-fix" / "profile.json")
    return work / "program.py"


# -- every rule's golden cases: quick fixes one by one, and fix-all, end where `apply` ends ------
def quick_fix(actions, unsafe: bool) -> lsp.CodeAction | None:
    allowed = ("safe", "unsafe") if unsafe else ("safe",)
    return next(
        (
            a
            for a in actions
            if a.kind == lsp.CodeActionKind.QuickFix
            and a.title.startswith("Fix ")
            and a.diagnostics
            and a.diagnostics[0].data["safety"] in allowed
            and not a.diagnostics[0].data.get("fallback")  # `apply` writes the preferred fix of the two
        ),
        None,
    )


async def fix_one_by_one(client, uri: str, text: str, version: int, *, unsafe: bool) -> tuple[str, int]:
    for _ in range(50):
        action = quick_fix(await code_actions(client, uri, only=[lsp.CodeActionKind.QuickFix]), unsafe)
        if action is None:
            return text, version
        text = apply_workspace_edit(text, uri, action.edit)
        version += 1
        change_doc(client, uri, version, text)
        remaining = ours(await diagnostics_for(client, uri, version))
        assert all(d.message != STALE for d in remaining), "a quick fix made the Profile look stale"
    raise AssertionError("quick fixes do not converge")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def golden_server(tmp_path_factory):
    """One server for every golden case (a workspace folder each), started once."""
    root = tmp_path_factory.mktemp("golden")
    programs = {}
    for case in CASES:
        program = programs[case] = stage(case, root / f"{case.parent.name}-{case.name}")
        if case in UNSAFE_CASES:
            (program.parent / "pyproject.toml").write_text(f'[tool.recompile-fix]\nselect = ["{case.parent.name}"]\n')
    async with session(root, folders=[p.parent for p in programs.values()]) as client:
        yield client, programs


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_golden_quick_fixes_and_fix_all(case, golden_server):
    """The golden output is what `apply` writes (test_golden.py). Taking the quick fixes one at
    a time gets there; fix-all gets there in one action. A case with unsafe-fixes is applied
    with `--unsafe-fixes --select RULE`: here, its rule alone (configuration) and its unsafe
    quick fixes too; fix-all then must leave those out."""
    client, programs = golden_server
    program = programs[case]
    unsafe = case in UNSAFE_CASES
    original = program.read_text(encoding="utf-8")
    expected = (case / "program.out.py").read_text(encoding="utf-8")
    uri = open_doc(client, program, original)
    version = 1
    diagnostics = ours(await diagnostics_for(client, uri, version))
    if expected != original:
        assert any(d.code == case.parent.name for d in diagnostics), diagnostics
    assert all(d.message != STALE for d in diagnostics)
    # Each diagnostic links to its rule's page (docs/rules/ID.md), as ruff's server does.
    assert all(d.code_description.href.endswith(f"/docs/rules/{d.code}.md") for d in diagnostics if d.code)

    # Safe quick fixes, one at a time: each edit is the rule's own, the Profile stays usable.
    safe_only, version = await fix_one_by_one(client, uri, original, version, unsafe=False)
    if not unsafe:
        assert safe_only == expected

    # Back to the profiled text: fix-all is one action, and it holds the safe fixes only.
    version += 1
    change_doc(client, uri, version, original)
    await diagnostics_for(client, uri, version)
    actions = await code_actions(client, uri, only=[lsp.CodeActionKind.SourceFixAll])
    assert [a.kind for a in actions] == (["source.fixAll.recompile-fix"] if safe_only != original else [])
    fixed = apply_workspace_edit(original, uri, actions[0].edit) if actions else original
    assert fixed == safe_only

    if unsafe:  # explicit quick fixes, unsafe ones included: what `apply --unsafe-fixes` writes
        version += 1
        change_doc(client, uri, version, original)
        await diagnostics_for(client, uri, version)
        everything, version = await fix_one_by_one(client, uri, original, version, unsafe=True)
        assert everything == expected
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))


# -- one project with a non-ASCII line and an unsafe fix ---------------------------------------
UNICODE = """import torch


@torch.compile
def fn(tag, x):
    return x * len(tag)


def g():
    return "ab"


for n in (3, 4, 5):
    _ = "\U0001f642\U0001f642"; fn("é", torch.ones(n))
for n in (6, 7):
    fn(g(), torch.zeros(n))
"""


@pytest.fixture(scope="module")
def unicode_recorded(tmp_path_factory):
    project = tmp_path_factory.mktemp("unicode")
    (project / "program.py").write_text(UNICODE, encoding="utf-8")
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=project, check=0)
    expected = {}
    for flag in ("", "--unsafe-fixes"):
        work = tmp_path_factory.mktemp("apply")
        shutil.copytree(project, work, dirs_exist_ok=True)
        run_cli("apply", ".", *([flag] if flag else []), cwd=work, check=0)
        expected[flag or "safe"] = (work / "program.py").read_text(encoding="utf-8")
    return project, expected


@pytest.fixture
def unicode_project(unicode_recorded, tmp_path):
    project, expected = unicode_recorded
    work = tmp_path / "uni"
    shutil.copytree(project, work)
    return work, expected


@pytest.mark.asyncio
async def test_utf16_positions_and_unsafe_fix(unicode_project):
    work, expected = unicode_project
    program = work / "program.py"
    async with session(work) as client:
        uri = open_doc(client, program, UNICODE)
        found = rf001(await diagnostics_for(client, uri, 1))
        assert [(d.range.start.line, d.data["safety"]) for d in found] == [(13, "safe"), (15, "unsafe")]
        line = UNICODE.splitlines()[13]
        call = line.index("fn(")
        # The call starts after two emoji: 2 UTF-16 units each, 1 code point each.
        assert found[0].range.start.character == len(line[:call].encode("utf-16-le")) // 2 == call + 2
        assert found[0].range.end.character == len(line.encode("utf-16-le")) // 2

        safe, unsafe = found
        at_safe = await code_actions(client, uri, safe.range, only=[lsp.CodeActionKind.QuickFix])
        fix = safe_quick_fix(at_safe)
        assert fix is not None and fix.is_preferred
        assert apply_workspace_edit(UNICODE, uri, fix.edit) == expected["safe"]

        at_unsafe = await code_actions(client, uri, unsafe.range, only=[lsp.CodeActionKind.QuickFix])
        unsafe_fix = next(a for a in at_unsafe if a.title.startswith("Fix "))
        assert "unsafe" in unsafe_fix.title and not unsafe_fix.is_preferred

        # Fix-all leaves the unsafe fix out; the explicit quick fix still applies afterwards.
        (fix_all,) = await code_actions(client, uri, only=[lsp.CodeActionKind.SourceFixAll])
        text = apply_workspace_edit(UNICODE, uri, fix_all.edit)
        assert text == expected["safe"]
        change_doc(client, uri, 2, text)
        left = rf001(await diagnostics_for(client, uri, 2))
        assert [d.data["safety"] for d in left] == ["unsafe"]
        assert await code_actions(client, uri, only=[lsp.CodeActionKind.SourceFixAll]) == []
        unsafe_fix = next(
            a
            for a in await code_actions(client, uri, left[0].range, only=[lsp.CodeActionKind.QuickFix])
            if a.title.startswith("Fix ") and a.diagnostics[0].code == "RF001"
        )
        assert unsafe_fix.diagnostics[0].data["safety"] == "unsafe"
        assert apply_workspace_edit(text, uri, unsafe_fix.edit) == expected["--unsafe-fixes"]


# -- the two-file project from conftest ------------------------------------------------------
@pytest.mark.asyncio
async def test_diagnostics_and_hover_evidence(project):
    main = project / "main.py"
    text = main.read_text()
    async with session(project) as client:
        uri = open_doc(client, main, text)
        (diagnostic,) = rf001(await diagnostics_for(client, uri, 1))
        assert diagnostic.severity == lsp.DiagnosticSeverity.Warning
        assert (diagnostic.range.start.line, diagnostic.range.start.character) == (11, 4)
        assert "`x`" in diagnostic.message and "mark it dynamic" in diagnostic.message
        hover = await client.text_document_hover_async(
            lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=diagnostic.range.start)
        )
        body = hover.contents.value
        assert "RF001" in body and "Evidence" in body
        assert "tensor 'x' size mismatch at index 0" in body  # the guard text
        assert "compiles: `" in body and "compile seconds: `" in body
        nothing = await client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=0, character=0)
            )
        )
        assert nothing is None


@pytest.mark.asyncio
async def test_a_forked_server_answers_as_a_spawned_one(project):
    """The tests' servers are forked from a preloaded one (tests/lsp_forkserver.py): the same
    diagnostics, code actions and exit as a server spawned as an editor spawns it."""
    main = project / "main.py"
    text = main.read_text()
    seen = []
    for fresh in (True, False):
        async with session(project, fresh=fresh) as client:
            uri = open_doc(client, main, text)
            diagnostics = await diagnostics_for(client, uri, 1)
            actions = await client.text_document_code_action_async(
                lsp.CodeActionParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=99, character=0)),
                    context=lsp.CodeActionContext(diagnostics=diagnostics),
                )
            )
            seen.append(([(d.range, d.message) for d in diagnostics], [(a.title, a.edit) for a in actions or []]))
            server = client._server
        await asyncio.wait_for(server.wait(), TIMEOUT)
        seen[-1] += (server.returncode,)
    assert seen[0] == seen[1]
    assert seen[0][0] and seen[0][1] and seen[0][2] == 0


@pytest.mark.asyncio
async def test_fix_all_resolved_lazily(project):
    """A client that can resolve an action's edit gets fix-all without waiting for its edits."""
    helpers = project / "helpers.py"
    text = helpers.read_text()
    work = project.parent / "expected"
    shutil.copytree(project, work)
    run_cli("apply", ".", cwd=work, check=0)
    capabilities = lsp.ClientCapabilities(
        text_document=lsp.TextDocumentClientCapabilities(
            code_action=lsp.CodeActionClientCapabilities(
                resolve_support=lsp.ClientCodeActionResolveOptions(properties=["edit"])
            )
        )
    )
    async with session(project, capabilities=capabilities) as client:
        uri = open_doc(client, helpers, text)
        await diagnostics_for(client, uri, 1)
        (action,) = await code_actions(client, uri, only=[lsp.CodeActionKind.SourceFixAll])
        assert action.data is not None  # resolvable (its edit may already be there if it was ready)
        bare = lsp.CodeAction(title=action.title, kind=action.kind, data=action.data)
        resolved = await client.code_action_resolve_async(bare)
        assert apply_workspace_edit(text, uri, resolved.edit) == (work / "helpers.py").read_text()
        if action.edit is not None:
            assert action.edit == resolved.edit


@pytest.mark.asyncio
async def test_suppress_adds_the_comment_and_the_diagnostic_goes(project):
    main = project / "main.py"
    text = main.read_text()
    async with session(project) as client:
        uri = open_doc(client, main, text)
        (diagnostic,) = rf001(await diagnostics_for(client, uri, 1))
        actions = await code_actions(client, uri, diagnostic.range)
        suppress = next(a for a in actions if a.title.startswith("Suppress RF001"))
        suppressed = apply_workspace_edit(text, uri, suppress.edit)
        assert suppressed.splitlines()[11] == "    fn(torch.ones(n))  # recompile-fix: ignore[RF001]"
        change_doc(client, uri, 2, suppressed)
        after = ours(await diagnostics_for(client, uri, 2))
        assert rf001(after) == [] and all(d.message != STALE for d in after)
        assert not [a for a in await code_actions(client, uri) if "RF001" in a.title]

        bare = text.replace("    fn(torch.ones(n))\n", "    fn(torch.ones(n))  # recompile-fix: ignore\n")
        change_doc(client, uri, 3, bare)
        assert rf001(await diagnostics_for(client, uri, 3)) == []
        other = text.replace("    fn(torch.ones(n))\n", "    fn(torch.ones(n))  # recompile-fix: ignore[RF002]\n")
        change_doc(client, uri, 4, other)
        assert len(rf001(await diagnostics_for(client, uri, 4))) == 1


@pytest.mark.asyncio
async def test_stale_profile_and_unsaved_buffer(project):
    helpers = project / "helpers.py"
    text = helpers.read_text()
    async with session(project) as client:
        # The buffer is what counts, saved or not: a matching buffer over a changed file on disk.
        helpers.write_text(text + "# edited on disk\n")
        uri = open_doc(client, helpers, text)
        assert len(rf001(await diagnostics_for(client, uri, 1))) == 1
        # An edit the server did not make: one information diagnostic, no Profile findings.
        change_doc(client, uri, 2, text.replace("y * 2", "y * 3"))
        after = ours(await diagnostics_for(client, uri, 2))
        (stale,) = [d for d in after if d.message == STALE]
        assert stale.severity == lsp.DiagnosticSeverity.Information and stale.range.start.line == 0
        assert rf001(after) == [] and all(
            d.data.get("kind") == "stale" or d.data.get("confidence") != "profile" for d in after
        )
        assert not [a for a in await code_actions(client, uri) if "RF001" in a.title]


@pytest.mark.asyncio
async def test_syntax_error_no_actions_no_crash(project):
    broken = project / "broken.py"
    source = "import torch\n\n\n@torch.compile\ndef f(x:\n    return x\n"
    broken.write_text(source)
    main = project / "main.py"
    async with session(project) as client:
        uri = open_doc(client, broken, source)
        assert ours(await diagnostics_for(client, uri, 1)) == []
        assert await code_actions(client, uri) == []
        hover = await client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=4, character=4)
            )
        )
        assert hover is None
        # A profiled file edited into a syntax error: stale, and still no actions.
        main_uri = open_doc(client, main, main.read_text())
        assert len(rf001(await diagnostics_for(client, main_uri, 1))) == 1
        change_doc(client, main_uri, 2, main.read_text().replace("def fn(x):", "def fn(x:"))
        assert [d.message for d in ours(await diagnostics_for(client, main_uri, 2))] == [STALE]
        assert await code_actions(client, main_uri) == []
        # The server is still there and still right.
        change_doc(client, main_uri, 3, main.read_text())
        assert len(rf001(await diagnostics_for(client, main_uri, 3))) == 1


@pytest.mark.slow  # a language server's debounce waited out: seconds, no torch
@pytest.mark.asyncio
async def test_rapid_edits_are_debounced(project):
    main = project / "main.py"
    text = main.read_text()
    async with session(project, debounce=0.5) as client:
        uri = open_doc(client, main, text)
        first = ours(await diagnostics_for(client, uri, 1))
        client.published.clear()
        typed = ""
        for version, ch in enumerate("x = 12", start=2):  # typing at the end of the file, then undo
            typed += ch
            change_doc(client, uri, version, text + typed + "\n")
        change_doc(client, uri, 8, text)
        final = ours(await diagnostics_for(client, uri, 8))
        await asyncio.sleep(0.7)  # nothing else is coming
        assert [p.version for p in client.published] == [8], "each keystroke was analysed"
        assert [(d.code, d.range) for d in final] == [(d.code, d.range) for d in first]


@pytest.mark.asyncio
async def test_profile_path_from_initialization_options(project, tmp_path):
    moved = tmp_path / "elsewhere.json"
    shutil.move(project / ".recompile-fix" / "profile.json", moved)
    main = project / "main.py"
    async with session(project, options={"profile": str(moved)}) as client:
        uri = open_doc(client, main, main.read_text())
        assert len(rf001(await diagnostics_for(client, uri, 1))) == 1


@pytest.mark.asyncio
async def test_never_runs_user_code(project):
    trap = project / "trap.py"
    marker = project / "ran"
    source = f"import torch\nopen({str(marker)!r}, 'w').close()\n\n\n@torch.compile\ndef f(x):\n    return x\n"
    trap.write_text(source)
    async with session(project) as client:
        uri = open_doc(client, trap, source)
        await diagnostics_for(client, uri, 1)
        await code_actions(client, uri)
    assert not marker.exists()


@pytest.mark.slow  # a language server waiting for a Profile to change: seconds, no torch
@pytest.mark.asyncio
async def test_a_new_profile_is_picked_up_without_editor_events(project):
    """`recompile-fix profile` run in a terminal: the open file's diagnostics follow."""
    main = project / "main.py"
    profile = project / ".recompile-fix" / "profile.json"
    recorded = profile.read_text()
    async with session(project) as client:
        uri = open_doc(client, main, main.read_text())
        assert len(rf001(await diagnostics_for(client, uri, 1))) == 1
        profile.unlink()
        await until(client, lambda: rf001(client.diagnostics[uri]) == [])
        profile.write_text(recorded)
        await until(client, lambda: len(rf001(client.diagnostics[uri])) == 1)


# The recompilation guide's LR-scheduler seed (one copy: its golden case).
STATIC = (GOLDEN / "RF004" / "deep_blocks_module" / "program.in.py").read_text()  # a safe fix without a Profile


@pytest.mark.asyncio
async def test_rules_that_need_no_profile(tmp_path):
    """No Profile at all: the static rules' findings, at lower confidence, fixed as `apply`
    fixes them in static mode."""
    work = tmp_path / "static"
    work.mkdir()
    (work / "program.py").write_text(STATIC)
    expected_dir = tmp_path / "expected"
    shutil.copytree(work, expected_dir)
    run_cli("apply", ".", cwd=expected_dir, check=0)
    expected = (expected_dir / "program.py").read_text()
    async with session(work) as client:
        uri = open_doc(client, work / "program.py", STATIC)
        found = ours(await diagnostics_for(client, uri, 1))
        assert "RF004" in [d.code for d in found]
        assert all(d.data["confidence"] == "static" and d.severity == lsp.DiagnosticSeverity.Information for d in found)
        hover = await client.text_document_hover_async(
            lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=found[0].range.start)
        )
        assert "seen in the source alone" in hover.contents.value
        (fix_all,) = await code_actions(client, uri, only=[lsp.CodeActionKind.SourceFixAll])
        assert apply_workspace_edit(STATIC, uri, fix_all.edit) == expected
        one_by_one, _ = await fix_one_by_one(client, uri, STATIC, 1, unsafe=False)
        assert one_by_one == expected


def test_positions_in_each_encoding_and_suppression_round_trip():
    from recompile_fix.lsp.positions import LineIndex, code_units
    from recompile_fix.suppression import strip_suppressions, with_suppression

    text = "a = 1\r\nb = '\U0001f642é'; c(x)\rd\n"
    index = LineIndex(text)
    at = text.index("c(x)")
    assert index.position(at, "utf-16") == (1, 11)  # the emoji is two UTF-16 units
    assert index.position(at, "utf-8") == (1, 14)
    assert index.position(at, "utf-32") == (1, 10)
    for encoding in ("utf-16", "utf-8", "utf-32"):
        assert index.offset_at(*index.position(at, encoding), encoding) == at
    assert index.line_text(2) == "d" and code_units("\U0001f642", "utf-16") == 2

    line = "    fn(x)  # keep this\n"
    once = with_suppression(line, "RF001")
    assert once == "    fn(x)  # keep this  # recompile-fix: ignore[RF001]\n"
    twice = with_suppression(once, "RF002")
    assert twice == "    fn(x)  # keep this  # recompile-fix: ignore[RF001, RF002]\n"
    assert strip_suppressions(once) == strip_suppressions(twice) == line


def test_server_answers_before_loading_the_engine():
    """The server is built (and answers `initialize`) before libcst, black, the rules or the
    pipeline are imported: they load on the worker thread after `initialized` (issue 29). A
    structural check, not a timing one."""
    code = (
        "import sys\n"
        "from recompile_fix.lsp.server import build_server\n"
        "build_server()\n"
        "heavy = ('libcst', 'black', 'torch', 'recompile_fix.rules', 'recompile_fix.pipeline', 'recompile_fix.lsp.engine')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
