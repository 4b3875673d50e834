"""The pygls server: LSP messages in, the engine's answers out. pygls is imported only here
(``pip install 'recompile-fix[lsp]'``); parsing and rewriting run on one worker thread, so they
never block the event loop."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import queue
import re
import sys
import threading
import traceback
from pathlib import Path

from recompile_fix.lsp.engine import Engine
from recompile_fix.lsp.items import FIX_ALL_KIND, SOURCE, Action, Analysis, Item
from recompile_fix.lsp.positions import Range
from recompile_fix.rule_docs import rule_url

__all__ = ["DEFAULT_DEBOUNCE", "POLL_INTERVAL", "build_server", "serve"]

log = logging.getLogger("recompile_fix.lsp")

DEFAULT_DEBOUNCE = 0.3  # seconds of quiet after a change before the file is analysed again
POLL_INTERVAL = 1.0  # seconds between checks that the Profile file is still the one read


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
def build_server(debounce: float = DEFAULT_DEBOUNCE):
    """The language server (pygls). Imported here so the rest of the tool does not need pygls."""
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer
    from pygls.uris import to_fs_path

    import recompile_fix

    server = LanguageServer(
        "recompile-fix",
        recompile_fix.__version__,
        text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
        protocol_cls=_protocol_class(),
    )
    worker = _Worker()
    severities = {
        "error": lsp.DiagnosticSeverity.Error,
        "warning": lsp.DiagnosticSeverity.Warning,
        "information": lsp.DiagnosticSeverity.Information,
        "hint": lsp.DiagnosticSeverity.Hint,
    }

    class State:
        def __init__(self):
            self.roots: list[Path] = []
            self.options: dict = {}
            self.engines: dict[Path, Engine] = {}
            self.pending: dict[str, asyncio.Task] = {}
            self.open: set[str] = set()
            self.latest: dict[str, Analysis] = {}
            self.encoding = "utf-16"
            self.resolve_edits = False
            self.debounce_s = debounce

    state = State()

    def report(message: str, kind=lsp.MessageType.Warning) -> None:
        try:
            server.window_log_message(lsp.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001 - not connected yet, or already gone
            log.warning("%s", message)

    def engine_for(file: Path) -> Engine:
        file = file.resolve()
        inside = [r for r in state.roots if r == file or r in file.parents]
        if inside:
            root = max(inside, key=lambda r: len(r.parts))
        else:  # no workspace folder: the nearest directory with a Profile or a pyproject.toml
            root = next(
                (d for d in file.parents if (d / ".recompile-fix").is_dir() or (d / "pyproject.toml").is_file()),
                file.parent,
            )
        engine = state.engines.get(root)
        if engine is None:
            profile = state.options.get("profile")
            engine = state.engines[root] = Engine(
                root, profile=profile, encoding=state.encoding, logger=lambda m: server_log(m)
            )
        return engine

    loop_holder: dict[str, asyncio.AbstractEventLoop] = {}

    def server_log(message: str) -> None:  # called from the worker thread
        loop = loop_holder.get("loop")
        if loop is not None:
            loop.call_soon_threadsafe(report, message)
        else:
            log.warning("%s", message)

    def document(uri: str):
        if uri not in state.open:
            return None
        doc = server.workspace.get_text_document(uri)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            return None
        return doc, Path(path)

    def analyze_now(engine: Engine, path: Path, text: str) -> Analysis:
        return engine.analyze(engine.relative(path), text)

    async def analysis_for(uri: str) -> tuple[Engine, Analysis, int | None] | None:
        found = document(uri)
        if found is None:
            return None
        doc, path = found
        engine = engine_for(path)
        text, version = doc.source, doc.version
        latest = state.latest.get(uri)
        if latest is not None and latest.text == text:
            return engine, latest, version
        analysis = await worker.submit(analyze_now, engine, path, text)
        return engine, analysis, version

    def to_range(rng: Range) -> lsp.Range:
        (l1, c1), (l2, c2) = rng
        return lsp.Range(start=lsp.Position(line=l1, character=c1), end=lsp.Position(line=l2, character=c2))

    def to_diagnostic(item: Item) -> lsp.Diagnostic:
        return lsp.Diagnostic(
            range=to_range(item.range),
            message=item.message,
            severity=severities[item.severity],
            code=item.rule,
            code_description=lsp.CodeDescription(href=rule_url(item.rule)) if item.rule else None,
            source=SOURCE,
            data=item.data,
        )

    def warm(engine: Engine, analysis: Analysis) -> None:
        """Background: the fix-all edits, so that the first code action finds them ready."""
        try:
            if analysis.parses and analysis.base is not None and analysis.base.source is not None:
                engine.fix_all(analysis)
        except Exception:  # noqa: BLE001 - the request that needs it will report it
            pass

    async def run_analysis(uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            found = document(uri)
            if found is None:
                return
            doc, path = found
            engine = engine_for(path)
            text, version = doc.source, doc.version
            analysis = await worker.submit(analyze_now, engine, path, text)
            if uri not in state.open or server.workspace.get_text_document(uri).version != version:
                return  # a newer change is on its way
            state.latest[uri] = analysis
            server.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=uri, version=version, diagnostics=[to_diagnostic(i) for i in analysis.items]
                )
            )
            worker.submit(warm, engine, analysis, priority=_Worker.BACKGROUND)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - never take the editor's session down
            report(f"recompile-fix: analysis of {uri} failed:\n{traceback.format_exc()}", lsp.MessageType.Error)

    def schedule(uri: str, delay: float) -> None:
        previous = state.pending.pop(uri, None)
        if previous is not None and not previous.done():
            previous.cancel()
        state.pending[uri] = asyncio.ensure_future(run_analysis(uri, delay))

    @server.feature(lsp.INITIALIZE)
    def initialize(ls, params: lsp.InitializeParams):
        state.options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        if "debounce" in state.options:
            try:
                state.debounce_s = float(state.options["debounce"])
            except (TypeError, ValueError):
                pass
        roots = [to_fs_path(f.uri) for f in (params.workspace_folders or [])]
        if params.root_uri:
            roots.append(to_fs_path(params.root_uri))
        elif params.root_path:
            roots.append(params.root_path)
        state.roots = [Path(r).resolve() for r in roots if r]
        encoding = ls.workspace.position_encoding
        state.encoding = str(getattr(encoding, "value", encoding) or "utf-16")
        resolve_support = _get(params.capabilities, "text_document", "code_action", "resolve_support")
        state.resolve_edits = bool(resolve_support and "edit" in (resolve_support.properties or []))

    async def poll_profiles() -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            try:
                if any(engine.outdated() for engine in list(state.engines.values())):
                    refresh_all()
            except Exception:  # noqa: BLE001
                report(f"recompile-fix: {traceback.format_exc()}")

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls, params):
        loop_holder["loop"] = asyncio.get_running_loop()
        loop_holder["poll"] = asyncio.ensure_future(poll_profiles())
        worker.submit(_warm_black, priority=_Worker.BACKGROUND)
        if _get(ls.client_capabilities, "workspace", "did_change_watched_files", "dynamic_registration"):
            try:
                await ls.client_register_capability_async(
                    lsp.RegistrationParams(
                        registrations=[
                            lsp.Registration(
                                id="recompile-fix-watch",
                                method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                                    watchers=[
                                        lsp.FileSystemWatcher(glob_pattern="**/.recompile-fix/*.json"),
                                        lsp.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                                    ]
                                ),
                            )
                        ]
                    )
                )
            except Exception:  # noqa: BLE001 - watching is a convenience
                pass

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: lsp.DidOpenTextDocumentParams):
        state.open.add(params.text_document.uri)
        schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: lsp.DidChangeTextDocumentParams):
        schedule(params.text_document.uri, state.debounce_s)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params: lsp.DidSaveTextDocumentParams):
        refresh_all()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: lsp.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        state.open.discard(uri)
        state.latest.pop(uri, None)
        task = state.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls, params: lsp.DidChangeWorkspaceFoldersParams):
        removed = {Path(to_fs_path(f.uri)).resolve() for f in params.event.removed or []}
        added = [Path(to_fs_path(f.uri)).resolve() for f in params.event.added or []]
        state.roots = [r for r in state.roots if r not in removed] + added
        for root in removed:
            state.engines.pop(root, None)
        refresh_all()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls, params):
        refresh_all()

    def refresh_all() -> None:
        """A save may be a new Profile or configuration: analyse every open file again (the
        engine reloads what changed; unchanged files come back from its cache)."""
        for uri in list(state.open):
            schedule(uri, 0)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True),
    )
    async def code_action(ls, params: lsp.CodeActionParams):
        try:
            found = await analysis_for(params.text_document.uri)
            if found is None:
                return None
            engine, analysis, version = found
            rng = (
                (params.range.start.line, params.range.start.character),
                (params.range.end.line, params.range.end.character),
            )
            only = [str(k.value if hasattr(k, "value") else k) for k in (params.context.only or [])] or None
            actions = await worker.submit(lambda: engine.actions(analysis, rng, only, lazy_fix_all=state.resolve_edits))
            uri = params.text_document.uri
            return [to_code_action(uri, version, a) for a in actions] or None
        except Exception:  # noqa: BLE001
            report(f"recompile-fix: code actions failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return None

    def to_code_action(uri: str, version: int | None, action: Action) -> lsp.CodeAction:
        edit = None
        if action.edits is not None:
            edit = workspace_edit(uri, version, action.edits)
        return lsp.CodeAction(
            title=action.title,
            kind=action.kind,
            edit=edit,
            diagnostics=[to_diagnostic(i) for i in action.items] or None,
            is_preferred=action.preferred or None,
            data=dict(action.data, uri=uri) if action.data else None,
        )

    def workspace_edit(uri: str, version: int | None, edits) -> lsp.WorkspaceEdit:
        text_edits = [lsp.TextEdit(range=to_range(rng), new_text=text) for rng, text in edits]
        if _get(server.client_capabilities, "workspace", "workspace_edit", "document_changes"):
            return lsp.WorkspaceEdit(
                document_changes=[
                    lsp.TextDocumentEdit(
                        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                        edits=text_edits,
                    )
                ]
            )
        return lsp.WorkspaceEdit(changes={uri: text_edits})

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls, action: lsp.CodeAction):
        try:
            data = action.data or {}
            if not data.get("fix_all") or action.edit is not None:
                return action
            uri = data.get("uri")
            found = await analysis_for(uri)
            if found is None:
                return action
            engine, analysis, version = found
            if analysis.sha != data.get("sha"):
                return action  # the buffer changed since: nothing to apply
            edits = await worker.submit(engine.fix_all, analysis)
            if edits:
                action.edit = workspace_edit(uri, version, edits)
            return action
        except Exception:  # noqa: BLE001
            report(f"recompile-fix: resolving a code action failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return action

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls, params: lsp.HoverParams):
        try:
            found = await analysis_for(params.text_document.uri)
            if found is None:
                return None
            engine, analysis, _ = found
            result = engine.hover(analysis, (params.position.line, params.position.character))
            if result is None:
                return None
            text, rng = result
            return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text), range=to_range(rng))
        except Exception:  # noqa: BLE001
            report(f"recompile-fix: hover failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return None

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls, params):
        worker.stop()

    return server


_ANSWERED = object()  # a message already answered with an error: nothing more to do


def _protocol_class():
    """pygls's protocol, answering a request whose params do not fit its type (a negative
    position, a string for a number) with an Invalid Params error instead of dropping it, and
    following the LSP lifecycle: before ``initialize`` a request is answered ServerNotInitialized
    (-32002) and a notification dropped; after ``shutdown`` a request is answered InvalidRequest
    (-32600) and a notification dropped; ``exit`` is always obeyed (pygls exits 0 after
    ``shutdown``, 1 without)."""
    from pygls.exceptions import (
        JsonRpcException,
        JsonRpcInvalidParams,
        JsonRpcInvalidRequest,
        JsonRpcServerNotInitialized,
    )
    from pygls.protocol import LanguageServerProtocol

    class Protocol(LanguageServerProtocol):
        initialize_seen = False

        def _refused(self, data) -> bool:
            """Is this message one the lifecycle refuses? A refused request is answered here."""
            method = data.get("method")
            if not isinstance(method, str) or method == "exit":
                return False  # a response to one of our requests, or exit: always handled
            error: JsonRpcException | None = None
            if self._shutdown:
                error = JsonRpcInvalidRequest(f"the server is shut down: only exit is accepted, not {method}")
            elif not self.initialize_seen:
                if method == "initialize":
                    self.initialize_seen = True
                    return False
                error = JsonRpcServerNotInitialized(f"{method} before initialize")
            elif method == "initialize":
                error = JsonRpcInvalidRequest("initialize may only be sent once")
            if error is None:
                return False
            if "id" in data:
                self._send_response(data["id"], None, error.to_response_error())
            else:
                log.warning("ignoring a notification: %s", error)
            return True

        def structure_message(self, data):
            if "jsonrpc" in data and self._refused(data):
                return _ANSWERED
            try:
                return super().structure_message(data)
            except JsonRpcException:
                method = data.get("method", "")
                if "id" in data and method:
                    error = JsonRpcInvalidParams(f"invalid params for {method}")
                    self._send_response(data["id"], None, error.to_response_error())
                else:
                    log.warning("ignoring a notification with invalid params: %s", method or "?")
                return _ANSWERED

        def handle_message(self, message):
            if message is _ANSWERED:
                return None
            return super().handle_message(message)

    return Protocol


def _warm_black() -> None:
    from recompile_fix.edits.format import format_statement

    format_statement("x = 1")


def _get(obj, *names):
    for name in names:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def serve(debounce: float = DEFAULT_DEBOUNCE) -> None:
    """Run the language server on stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="recompile-fix lsp: %(message)s")
    server = build_server(debounce)
    from pygls.io_ import StdinAsyncReader, StdoutWriter

    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    code: int | str | None = None
    try:
        asyncio.run(_read_messages(server, StdinAsyncReader(sys.stdin.buffer, server.thread_pool)))
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


# -- reading messages: every request answered, a bad header never deafens the server ------------
# pygls's own loop drops a request whose params do not structure (no answer: the editor waits
# forever) and, after a header it cannot read (``Content-Length: abc``), reads each next body
# as a header: deaf for good. This loop finds the next ``Content-Length`` wherever it is (a lost
# body and the next header run into one line), and answers what it could not read.
# A message longer than this is refused (its header answered as unreadable once its body shows
# where it ended): `Content-Length: 99999999999` made the server wait for bytes that never came.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"Content-Length:[ \t]*(\d+)[ \t]*\r?\n$", re.IGNORECASE)
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


async def _read_messages(server, reader) -> None:
    protocol = server.protocol
    length = 0
    why_lost = "its Content-Length header was not a number"
    while not server._stop_event.is_set():
        header = await reader.readline()
        if not header:
            return
        match = _CONTENT_LENGTH.search(header)
        if match:
            lost = header[: match.start()]
            if lost.strip():  # the body of a message whose header could not be read
                _answer_unreadable(protocol, lost, why_lost)
            length = int(match.group(1))
            why_lost = "its Content-Length header was not a number"
            if length > MAX_MESSAGE_BYTES:
                log.warning("ignoring a message of %d bytes (at most %d)", length, MAX_MESSAGE_BYTES)
                why_lost = f"its Content-Length ({length}) is over {MAX_MESSAGE_BYTES} bytes"
                length = 0
            continue
        if header.strip():
            if header.lower().startswith(b"content-length"):
                log.warning("ignoring a message with an unreadable header: %r", header[:80])
                length = 0
            continue  # Content-Type, or the rest of a lost message
        if not length:
            continue
        body = await reader.readexactly(length)
        length = 0
        if not body:
            return
        if body.lstrip()[:1] == b"[":
            _answer_batch(protocol, body)
            continue
        try:
            message = json.loads(body, object_hook=protocol.structure_message)
        except Exception as exc:  # noqa: BLE001 - not JSON, or not a message
            _answer_unreadable(protocol, body, f"it is not a JSON-RPC message ({type(exc).__name__})")
            continue
        try:
            protocol.handle_message(message)
        except Exception:  # noqa: BLE001 - one bad message never stops the server
            log.exception("a message could not be handled")


def _answer_unreadable(protocol, body: bytes, why: str) -> None:
    from pygls.exceptions import JsonRpcParseError

    match = _ID.search(body)
    log.warning("could not read a message: %s", why)
    if match is None:
        return  # a notification, or no id to answer
    try:
        msg_id = json.loads(match.group(1))
    except ValueError:
        return
    protocol._send_response(
        msg_id, None, JsonRpcParseError(f"recompile-fix could not read this message: {why}").to_response_error()
    )


def _answer_batch(protocol, body: bytes) -> None:
    """A JSON-RPC batch: the LSP has none, so each request in it is answered InvalidRequest, one
    response each (a client that sent one reads them one by one), and nothing in it is run; a
    batch with no request in it is answered once, with no id."""
    from pygls.exceptions import JsonRpcInvalidRequest

    try:
        batch = json.loads(body)
    except ValueError:
        _answer_unreadable(protocol, body, "it is not JSON")
        return
    log.warning("refusing a JSON-RPC batch of %d message(s): the LSP has no batches", len(batch))
    error = JsonRpcInvalidRequest("JSON-RPC batches are not part of the LSP: send each message on its own")
    requests = [m for m in batch if isinstance(m, dict) and "id" in m and isinstance(m.get("method"), str)]
    for message in requests:
        protocol._send_response(message["id"], None, error.to_response_error())
    if not requests and not any(isinstance(m, dict) and "method" in m for m in batch):
        protocol._send_response(None, None, error.to_response_error())
