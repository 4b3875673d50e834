"""The pygls server: LSP messages in, the engine's answers out. pygls is imported only here
and in ``transport`` (``pip install 'recompile-fix[lsp]'``); parsing and rewriting run on one
worker thread, so they never block the event loop.

Each handler is a module-level function of the ``_Session`` the server was built with (the
workspace's roots and options, one engine per project root, the open buffers), registered by
``build_server``."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import queue
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recompile_fix.lsp.items import FIX_ALL_KIND, Action, Analysis, Item, diagnostic_json
from recompile_fix.lsp.positions import Range
from recompile_fix.lsp.transport import protocol_class, read_messages

if TYPE_CHECKING:  # pygls and lsprotocol are imported when the server is built, not before;
    # the engine (libcst, black, the rules) on the worker thread, after `initialized`
    from lsprotocol import types as lsp_types
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import TextDocument

    from recompile_fix.lsp.engine import Engine

__all__ = ["DEFAULT_DEBOUNCE", "POLL_INTERVAL", "build_server", "serve"]

log = logging.getLogger("recompile_fix.lsp")

DEFAULT_DEBOUNCE = 0.3  # seconds of quiet after a change before the file is analysed again
POLL_INTERVAL = 1.0  # seconds between checks that the Profile file is still the one read
_ERROR, _WARNING = 1, 2  # LSP MessageType values, for the editor's log
TextEdits = list[tuple[Range, str]]  # one buffer's edits, in the client's positions


# -- one worker thread: parsing and rewriting never block the event loop ----------------------
class _Worker:
    """Runs the engine's work in one thread, requests before background warm-up."""

    URGENT, BACKGROUND = 0, 1

    def __init__(self):
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._seq = itertools.count()
        self._thread = threading.Thread(target=self._run, name="recompile-fix-lsp", daemon=True)
        self._thread.start()

    def submit(self, fn, *args, priority: int = URGENT) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((priority, next(self._seq), fn, args, loop, future))
        return future

    def stop(self) -> None:
        self._queue.put((-1, -1, None, (), None, None))

    def _run(self) -> None:
        while True:
            _, _, fn, args, loop, future = self._queue.get()
            if fn is None:
                return
            if future.cancelled():
                continue
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop is closed: the server is exiting
                return


def _settle(future: asyncio.Future, result, error) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


# -- the pygls server -------------------------------------------------------------------------


@dataclass
class _Session:
    """What the handlers share: the server and its worker, the workspace's roots and options, one
    engine per project root, and the open buffers (their pending analyses and latest results)."""

    server: LanguageServer
    worker: _Worker
    debounce_s: float
    roots: list[Path] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    engines: dict[Path, Engine] = field(default_factory=dict)
    pending: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    latest: dict[str, Analysis] = field(default_factory=dict)
    encoding: str = "utf-16"
    resolve_edits: bool = False  # the client resolves a code action's edit when it is chosen
    loop: asyncio.AbstractEventLoop | None = None  # the event loop, once initialized
    poll: asyncio.Task[None] | None = None
    context: str | None = None  # first_open.workspace_context, once initialized
    # uri -> (version, diagnostics): what ``serve`` published before pygls ran (lsp/first_open)
    published_early: dict[str, tuple[Any, list[Any]]] = field(default_factory=dict)
    # project root -> the engine that analysed the first opened file before pygls ran
    # (lsp/first_analysis), taken by the first ``_engine_for`` of that root
    first_engines: dict[Path, Engine] = field(default_factory=dict)


def build_server(
    debounce: float = DEFAULT_DEBOUNCE,
    published_early: dict[str, tuple[Any, list[Any]]] | None = None,
    first_engines: dict[Path, Engine] | None = None,
) -> LanguageServer:
    """The language server (pygls). Imported here so the rest of the tool does not need pygls.
    ``published_early``: diagnostics ``serve`` published before it (lsp/first_open,
    lsp/first_analysis); ``first_engines``: the engines that analysed them, by project root."""
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    import recompile_fix

    server = LanguageServer(
        "recompile-fix",
        recompile_fix.__version__,
        text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
        protocol_cls=protocol_class(),
    )
    session = _Session(
        server,
        _Worker(),
        debounce,
        published_early=dict(published_early or {}),
        first_engines=dict(first_engines or {}),
    )
    actions = lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True
    )
    handlers: list[tuple[str, Callable[..., Any], Any]] = [
        (lsp.INITIALIZE, _initialize, None),
        (lsp.INITIALIZED, _initialized, None),
        (lsp.TEXT_DOCUMENT_DID_OPEN, _did_open, None),
        (lsp.TEXT_DOCUMENT_DID_CHANGE, _did_change, None),
        (lsp.TEXT_DOCUMENT_DID_SAVE, _did_save, None),
        (lsp.TEXT_DOCUMENT_DID_CLOSE, _did_close, None),
        (lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, _did_change_folders, None),
        (lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, _did_change_watched, None),
        (lsp.TEXT_DOCUMENT_CODE_ACTION, _code_action, actions),
        (lsp.CODE_ACTION_RESOLVE, _resolve_code_action, None),
        (lsp.TEXT_DOCUMENT_HOVER, _hover, None),
        (lsp.SHUTDOWN, _shutdown, None),
    ]
    for method, handler, options in handlers:
        # pygls calls a handler with the message's params; each gets the session first.
        server.feature(method, options)(functools.partial(handler, session))
    return server


# -- what the handlers share --------------------------------------------------------------------
def _report(session: _Session, message: str, kind: int = _WARNING) -> None:
    """A line in the editor's log (``kind``: an LSP MessageType)."""
    from lsprotocol import types as lsp

    try:
        session.server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType(kind), message=message))
    except Exception:  # noqa: BLE001 - not connected yet, or already gone
        log.warning("%s", message)


def _server_log(session: _Session, message: str) -> None:
    """``_report`` from the worker thread (the engine's logger)."""
    if session.loop is not None:
        session.loop.call_soon_threadsafe(_report, session, message)
    else:
        log.warning("%s", message)


def _engine_for(session: _Session, file: Path) -> Engine:
    """The engine of the project ``file`` belongs to (first_analysis.project_root); the first
    file's, where ``serve`` analysed it before pygls ran, is the one that analysis made."""
    from recompile_fix.lsp.first_analysis import project_root

    root = project_root(session.roots, file)
    engine = session.engines.get(root)
    if engine is None:
        early = session.first_engines.pop(root, None)
        if early is not None and (early.encoding, early.explicit_profile) == (
            session.encoding,
            session.options.get("profile"),
        ):
            early._log = functools.partial(_server_log, session)
            session.engines[root] = early
            return early
        from recompile_fix.lsp.engine import Engine

        engine = session.engines[root] = Engine(
            root,
            profile=session.options.get("profile"),
            encoding=session.encoding,
            logger=functools.partial(_server_log, session),
        )
    return engine


def _document(session: _Session, uri: str) -> tuple[TextDocument, Path] | None:
    """An open buffer and the file it is, or None (closed, or not a file)."""
    from pygls.uris import to_fs_path

    if uri not in session.open:
        return None
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is None:
        return None
    return session.server.workspace.get_text_document(uri), Path(path)


def _analyze_now(engine: Engine, path: Path, text: str) -> Analysis:
    return engine.analyze(engine.relative(path), text)


async def _analysis_for(session: _Session, uri: str) -> tuple[Engine, Analysis, int | None] | None:
    """The analysis of a buffer's text as it is now (the latest published one if still current)."""
    found = _document(session, uri)
    if found is None:
        return None
    doc, path = found
    engine = _engine_for(session, path)
    text, version = doc.source, doc.version
    latest = session.latest.get(uri)
    if latest is not None and latest.text == text:
        return engine, latest, version
    analysis = await session.worker.submit(_analyze_now, engine, path, text)
    return engine, analysis, version


def _to_range(rng: Range) -> lsp_types.Range:
    from lsprotocol import types as lsp

    (l1, c1), (l2, c2) = rng
    return lsp.Range(start=lsp.Position(line=l1, character=c1), end=lsp.Position(line=l2, character=c2))


def _to_diagnostic(item: Item) -> lsp_types.Diagnostic:
    from lsprotocol import types as lsp

    return _converter().structure(diagnostic_json(item), lsp.Diagnostic)


@functools.cache
def _converter():
    """lsprotocol's converter, built once: ``get_converter()`` makes a new one on every call, and
    a new one generates its structuring code again (about 10 ms a diagnostic, where a kept one
    takes 0.01 ms)."""
    from lsprotocol.converters import get_converter

    return get_converter()


def _warm(engine: Engine, analysis: Analysis) -> None:
    """Background: the fix-all edits, so that the first code action finds them ready."""
    try:
        if analysis.parses and analysis.base.source is not None:
            engine.fix_all(analysis)
    except Exception:  # noqa: BLE001 - the request that needs it will report it
        pass


# -- analysis on open, change and save ----------------------------------------------------------
async def _run_analysis(session: _Session, uri: str, delay: float) -> None:
    """After ``delay`` seconds, analyse the buffer and publish its diagnostics (unless a newer
    change is on its way), then warm its fix-all edits."""
    from lsprotocol import types as lsp

    try:
        if delay:
            await asyncio.sleep(delay)
        found = _document(session, uri)
        if found is None:
            return
        doc, path = found
        engine = _engine_for(session, path)
        text, version = doc.source, doc.version
        analysis = await session.worker.submit(_analyze_now, engine, path, text)
        if uri not in session.open or session.server.workspace.get_text_document(uri).version != version:
            return  # a newer change is on its way
        session.latest[uri] = analysis
        diagnostics = [_to_diagnostic(i) for i in analysis.items]
        published = session.server.protocol._converter.unstructure(diagnostics)
        if session.published_early.pop(uri, None) != (version, published):
            session.server.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics)
            )
        session.worker.submit(_warm, engine, analysis, priority=_Worker.BACKGROUND)
        if session.context is not None:  # here, not queued: kept before a shutdown that follows at once
            _keep_published(engine, uri, text, session.context, published)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - never take the editor's session down
        _report(session, f"recompile-fix: analysis of {uri} failed:\n{traceback.format_exc()}", _ERROR)


def _keep_published(engine: Engine, uri: str, text: str, context: str, published: list[Any]) -> None:
    """Keep what was published for this text, for the next server's first open (one small file
    written; the tool's code digest was read by ``_warm_engine``)."""
    from recompile_fix.config import DEFAULT_PROFILE, find_pyproject
    from recompile_fix.lsp import first_open

    pyproject = find_pyproject(engine.root) or engine.root / "pyproject.toml"
    profile = engine.profile_path or engine.root / DEFAULT_PROFILE
    first_open.store(uri, text, context, published, [str(profile), str(pyproject)])


def _schedule(session: _Session, uri: str, delay: float) -> None:
    previous = session.pending.pop(uri, None)
    if previous is not None and not previous.done():
        previous.cancel()
    session.pending[uri] = asyncio.ensure_future(_run_analysis(session, uri, delay))


def _refresh_all(session: _Session) -> None:
    """A save may be a new Profile or configuration: analyse every open file again (the engine
    reloads what changed; unchanged files come back from its cache)."""
    for uri in list(session.open):
        _schedule(session, uri, 0)


async def _poll_profiles(session: _Session) -> None:
    """Not every editor reports file changes: look for a new Profile every POLL_INTERVAL."""
    while True:
        await asyncio.sleep(POLL_INTERVAL)
        try:
            if any(engine.outdated() for engine in list(session.engines.values())):
                _refresh_all(session)
        except Exception:  # noqa: BLE001
            _report(session, f"recompile-fix: {traceback.format_exc()}")


# -- the handlers -------------------------------------------------------------------------------
def _initialize(session: _Session, params: lsp_types.InitializeParams) -> None:
    options = params.initialization_options
    session.options = options if isinstance(options, dict) else {}
    if "debounce" in session.options:
        try:
            session.debounce_s = float(session.options["debounce"])
        except (TypeError, ValueError):
            pass
    from recompile_fix.lsp.first_analysis import workspace_roots

    session.roots = workspace_roots(session.server.protocol._converter.unstructure(params))
    encoding = session.server.workspace.position_encoding
    session.encoding = str(getattr(encoding, "value", encoding) or "utf-16")
    resolve_support = _get(params.capabilities, "text_document", "code_action", "resolve_support")
    session.resolve_edits = bool(resolve_support and "edit" in (resolve_support.properties or []))
    from recompile_fix.lsp.first_open import workspace_context

    session.context = workspace_context(
        [f.uri for f in (params.workspace_folders or [])],
        params.root_uri,
        params.root_path,
        params.initialization_options,
        session.encoding,
    )


async def _initialized(session: _Session, params: lsp_types.InitializedParams) -> None:
    """Start polling for new Profiles, warm black, and ask to be told of Profile and
    configuration changes where the client can."""
    from lsprotocol import types as lsp

    server = session.server
    session.loop = asyncio.get_running_loop()
    session.poll = asyncio.ensure_future(_poll_profiles(session))
    session.worker.submit(_warm_engine, priority=_Worker.BACKGROUND)
    session.worker.submit(_warm_formatter, priority=_Worker.BACKGROUND)
    if not _get(server.client_capabilities, "workspace", "did_change_watched_files", "dynamic_registration"):
        return
    watchers = [
        lsp.FileSystemWatcher(glob_pattern="**/.recompile-fix/*.json"),
        lsp.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
    ]
    registration = lsp.Registration(
        id="recompile-fix-watch",
        method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
    )
    try:
        await server.client_register_capability_async(lsp.RegistrationParams(registrations=[registration]))
    except Exception:  # noqa: BLE001 - watching is a convenience
        pass


def _did_open(session: _Session, params: lsp_types.DidOpenTextDocumentParams) -> None:
    session.open.add(params.text_document.uri)
    _schedule(session, params.text_document.uri, 0)


def _did_change(session: _Session, params: lsp_types.DidChangeTextDocumentParams) -> None:
    _schedule(session, params.text_document.uri, session.debounce_s)


def _did_save(session: _Session, params: lsp_types.DidSaveTextDocumentParams) -> None:
    _refresh_all(session)


def _did_close(session: _Session, params: lsp_types.DidCloseTextDocumentParams) -> None:
    from lsprotocol import types as lsp

    uri = params.text_document.uri
    session.open.discard(uri)
    session.latest.pop(uri, None)
    task = session.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    session.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


def _did_change_folders(session: _Session, params: lsp_types.DidChangeWorkspaceFoldersParams) -> None:
    from pygls.uris import to_fs_path

    removed = {Path(path).resolve() for f in params.event.removed or [] if (path := to_fs_path(f.uri))}
    added = [Path(path).resolve() for f in params.event.added or [] if (path := to_fs_path(f.uri))]
    session.roots = [r for r in session.roots if r not in removed] + added
    for root in removed:
        session.engines.pop(root, None)
    _refresh_all(session)


def _did_change_watched(session: _Session, params: lsp_types.DidChangeWatchedFilesParams) -> None:
    _refresh_all(session)


async def _code_action(session: _Session, params: lsp_types.CodeActionParams) -> list[lsp_types.CodeAction] | None:
    try:
        found = await _analysis_for(session, params.text_document.uri)
        if found is None:
            return None
        engine, analysis, version = found
        start, end = params.range.start, params.range.end
        rng = ((start.line, start.character), (end.line, end.character))
        only = [str(getattr(k, "value", k)) for k in (params.context.only or [])] or None
        actions = await session.worker.submit(
            functools.partial(engine.actions, analysis, rng, only, lazy_fix_all=session.resolve_edits)
        )
        uri = params.text_document.uri
        return [_to_code_action(session, uri, version, a) for a in actions] or None
    except Exception:  # noqa: BLE001
        _report(session, f"recompile-fix: code actions failed:\n{traceback.format_exc()}", _ERROR)
        return None


def _to_code_action(session: _Session, uri: str, version: int | None, action: Action) -> lsp_types.CodeAction:
    from lsprotocol import types as lsp

    return lsp.CodeAction(
        title=action.title,
        kind=action.kind,
        edit=_workspace_edit(session, uri, version, action.edits) if action.edits is not None else None,
        diagnostics=[_to_diagnostic(i) for i in action.items] or None,
        is_preferred=action.preferred or None,
        data=dict(action.data, uri=uri) if action.data else None,
    )


def _workspace_edit(session: _Session, uri: str, version: int | None, edits: TextEdits) -> lsp_types.WorkspaceEdit:
    """The edits of one buffer, versioned where the client takes document changes."""
    from lsprotocol import types as lsp

    text_edits = [lsp.TextEdit(range=_to_range(rng), new_text=text) for rng, text in edits]
    if _get(session.server.client_capabilities, "workspace", "workspace_edit", "document_changes"):
        return lsp.WorkspaceEdit(
            document_changes=[
                lsp.TextDocumentEdit(
                    text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                    edits=list(text_edits),
                )
            ]
        )
    return lsp.WorkspaceEdit(changes={uri: text_edits})


async def _resolve_code_action(session: _Session, action: lsp_types.CodeAction) -> lsp_types.CodeAction:
    """The lazily resolved fix-all: its edits, if the buffer is still the text it was offered on."""
    try:
        data = action.data or {}
        uri = data.get("uri")
        if not data.get("fix_all") or action.edit is not None or not isinstance(uri, str):
            return action
        found = await _analysis_for(session, uri)
        if found is None:
            return action
        engine, analysis, version = found
        if analysis.sha != data.get("sha"):
            return action  # the buffer changed since: nothing to apply
        edits = await session.worker.submit(engine.fix_all, analysis)
        if edits:
            action.edit = _workspace_edit(session, uri, version, edits)
        return action
    except Exception:  # noqa: BLE001
        _report(session, f"recompile-fix: resolving a code action failed:\n{traceback.format_exc()}", _ERROR)
        return action


async def _hover(session: _Session, params: lsp_types.HoverParams) -> lsp_types.Hover | None:
    from lsprotocol import types as lsp

    try:
        found = await _analysis_for(session, params.text_document.uri)
        if found is None:
            return None
        engine, analysis, _ = found
        result = engine.hover(analysis, (params.position.line, params.position.character))
        if result is None:
            return None
        text, rng = result
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text), range=_to_range(rng))
    except Exception:  # noqa: BLE001
        _report(session, f"recompile-fix: hover failed:\n{traceback.format_exc()}", _ERROR)
        return None


def _shutdown(session: _Session, params: None) -> None:
    session.worker.stop()


def _warm_engine() -> None:
    """Background, after `initialized`: load the engine (libcst, the rules, the pipeline) and
    what a first analysis loads (libcst's parser, this tool's torch version), so that the server
    answered `initialize` before paying for them and the first buffer opened is analysed at once.
    black, which only the fixes need, is ``_warm_formatter``'s: a buffer opened meanwhile is
    analysed between the two (an urgent task runs before a queued background one)."""
    import libcst

    import recompile_fix.lsp.engine
    import recompile_fix.rules  # noqa: F401
    from recompile_fix.findings.releases import _own_torch_version
    from recompile_fix.tool_code import code_digest

    libcst.parse_module("x = 1\n")
    _own_torch_version()
    code_digest()


def _warm_formatter() -> None:
    from recompile_fix.edits.format import format_statement

    format_statement("x = 1")


def _get(obj, *names):
    for name in names:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def serve(debounce: float = DEFAULT_DEBOUNCE, *, answer_early: bool = True) -> None:
    """Run the language server on stdin/stdout until the client says exit. ``initialize`` is
    answered while pygls loads (lsp/early.py), and the first file opened is analysed before it
    runs (lsp/first_open.py, lsp/first_analysis.py); ``answer_early=False`` leaves all to pygls."""
    logging.basicConfig(level=logging.WARNING, format="recompile-fix lsp: %(message)s")
    prefix, answered_id = b"", None
    published_early: dict[str, tuple[Any, list[Any]]] = {}
    first_engines: dict[Path, Engine] = {}
    if answer_early:
        from recompile_fix.cli.deferred_imports import defer_heavy
        from recompile_fix.lsp import early
        from recompile_fix.tool_code import code_digest

        # libcst loads when an analysis first needs a tree (a Profile's fixes), not with the
        # engine: a file with nothing to fix is diagnosed without it. One thread yet: see defer.
        defer_heavy()
        # Before the loading thread: read beside its imports, the tool's ~170 files waited for
        # the interpreter lock at every read (235 ms where 20 ms will do), and the kept
        # diagnostics of a reopened file (lsp/first_open) waited with them.
        code_digest()
        loading = _Loading()
        loading.start()
        prefix, first = early.read_first_message(sys.stdin.buffer)
        answer = early.answer_initialize(first, _version())
        if answer is not None and first is not None:
            sys.stdout.buffer.write(answer)
            sys.stdout.buffer.flush()
            answered_id = first["id"]
            more, published_early, first_engines = _publish_first_open(first["params"], loading)
            prefix += more
        loading.go_on.set()
        loading.join()
    server = build_server(debounce, published_early, first_engines)
    from pygls.io_ import StdinAsyncReader, StdoutWriter

    server._stop_event = threading.Event()
    setattr(server.protocol, "answered_early", answered_id)  # noqa: B010 - transport.protocol_class's
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    reader: Any = StdinAsyncReader(sys.stdin.buffer, server.thread_pool)
    if prefix:
        from recompile_fix.lsp.early import PrefixedReader

        reader = PrefixedReader(prefix, reader)
    code: int | str | None = None
    try:
        asyncio.run(read_messages(server, reader))
    except BrokenPipeError:
        log.error("the editor closed the connection; exiting")
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # the exit notification: 0 after shutdown, 1 without (the LSP spec)
        code = exc.code
    finally:
        server.shutdown()
    if code:
        sys.exit(code)


class _Loading(threading.Thread):
    """Background, from spawn: the engine (``engine_loaded`` once it can analyse), then, once
    the first file is published (``go_on``) or ``_FIRST_OPEN_WAIT`` seconds on, what
    ``build_server`` imports. In that order, and not side by side, because both are Python on
    one interpreter lock: the first file's analysis would wait for pygls's imports otherwise."""

    def __init__(self) -> None:
        super().__init__(name="recompile-fix-lsp-load", daemon=True)
        self.engine_loaded = threading.Event()
        self.go_on = threading.Event()

    def run(self) -> None:
        try:
            import recompile_fix.lsp.engine
            import recompile_fix.lsp.first_analysis
            import recompile_fix.rules  # noqa: F401
        except Exception:  # noqa: BLE001 - the server reports it when it needs the engine
            pass
        finally:
            self.engine_loaded.set()
        self.go_on.wait(_FIRST_OPEN_WAIT)
        import lsprotocol.types  # noqa: F401
        import pygls.io_  # noqa: F401
        import pygls.lsp.server  # noqa: F401


_FIRST_OPEN_WAIT = 1.0  # seconds pygls's imports wait for the first file's analysis


def _publish_first_open(
    params: dict[str, Any], loading: _Loading
) -> tuple[bytes, dict[str, tuple[Any, list[Any]]], dict[Path, Engine]]:
    """Before pygls runs: read on to the editor's first ``didOpen`` and publish its diagnostics:
    the ones kept for its text, if any (lsp/first_open), else the engine's (lsp/first_analysis).
    The bytes read, for pygls to read again; what was published; the engine that analysed it."""
    from recompile_fix.lsp import early, first_open

    read, opened = first_open.read_until_open(sys.stdin.buffer, early.read_first_message)
    document = first_open.file_text(opened) if opened is not None else None
    if document is None:
        return read, {}, {}
    uri, text, version = document
    encoding = early.position_encoding(params)
    context = first_open.context_of_message(params, encoding)
    diagnostics = first_open.lookup(uri, text, context)
    engines: dict[Path, Engine] = {}
    if diagnostics is None:
        loading.engine_loaded.wait()
        from recompile_fix.lsp import first_analysis

        found = first_analysis.analyze(params, uri, text, encoding)
        if found is None:
            return read, {}, {}
        diagnostics, engines = found.diagnostics, {found.root: found.engine}
    sys.stdout.buffer.write(first_open.publish_message(uri, version, diagnostics))
    sys.stdout.buffer.flush()
    for engine in engines.values():  # kept now: the server's own analysis may not run before an exit
        _keep_published(engine, uri, text, context, diagnostics)
    return read, {uri: (version, diagnostics)}, engines


def _version() -> str:
    import recompile_fix

    return recompile_fix.__version__
