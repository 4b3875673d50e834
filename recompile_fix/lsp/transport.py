"""How the language server reads and answers messages on stdio, whatever the editor sends: the
LSP lifecycle enforced (``protocol_class``), every request answered (one whose params do not fit
its type, one that could not be read, a batch), and a bad header never deafens the server
(``read_messages``). pygls is imported only inside these functions."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

__all__ = ["MAX_MESSAGE_BYTES", "protocol_class", "read_messages"]

log = logging.getLogger("recompile_fix.lsp")

_ANSWERED = object()  # a message already answered with an error: nothing more to do


def protocol_class() -> Any:
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
        answered_early: int | str | None = None  # the initialize request lsp/early.py answered

        def _send_response(self, msg_id, result=None, error=None):
            if msg_id is not None and msg_id == self.answered_early:
                self.answered_early = None  # answered already: pygls ran it for its own state
                if error is not None:
                    log.warning("initialize, answered early, failed in pygls: %s", error)
                return
            super()._send_response(msg_id, result, error)

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


async def read_messages(server: Any, reader: Any) -> None:
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


def _answer_unreadable(protocol: Any, body: bytes, why: str) -> None:
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


def _answer_batch(protocol: Any, body: bytes) -> None:
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
