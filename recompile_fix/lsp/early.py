"""The answer to ``initialize`` before pygls is loaded: importing pygls and lsprotocol costs about
300 ms (lsprotocol.types alone 250 ms), and an editor shows the server as starting until its
``initialize`` is answered. ``serve`` loads them on another thread meanwhile, reads the first
message here, answers it when it is a well-formed ``initialize`` request, and hands every byte it
read to pygls's reader as if it had not been read: pygls then runs the same request (its
workspace, our ``_initialize``) with its own answer dropped (transport.protocol_class).

The capabilities are the ones pygls builds for ``build_server``'s handlers;
tests/test_lsp_startup.py compares the two for several clients, so they cannot drift apart.
Standard library only."""

from __future__ import annotations

import json
import re
from typing import Any, BinaryIO

__all__ = ["PrefixedReader", "answer_initialize", "capabilities", "position_encoding", "read_first_message"]

_CONTENT_LENGTH = re.compile(rb"^Content-Length:[ \t]*(\d+)[ \t]*\r?\n$", re.IGNORECASE)
_ENCODINGS = ("utf-8", "utf-16", "utf-32")  # what pygls converts positions for, in its order
_MAX_EARLY_BYTES = 1024 * 1024  # a larger first message is left to pygls's reader


def capabilities(position_encoding: str) -> dict[str, Any]:
    """The ServerCapabilities pygls builds for the server's handlers (server.build_server)."""
    from recompile_fix.lsp.items import FIX_ALL_KIND

    return {
        "positionEncoding": position_encoding,
        "textDocumentSync": {"openClose": True, "change": 2, "save": True},
        "codeActionProvider": {"codeActionKinds": ["quickfix", FIX_ALL_KIND], "resolveProvider": True},
        "hoverProvider": True,
        "executeCommandProvider": {"commands": []},
        "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}},
    }


def position_encoding(params: dict[str, Any]) -> str:
    """pygls's choice: the client's first encoding that pygls supports, else UTF-16."""
    general = (params.get("capabilities") or {}).get("general") or {}
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    for encoding in offered if isinstance(offered, list) else []:
        if encoding in _ENCODINGS:
            return str(encoding)
    return "utf-16"


def read_first_message(stream: BinaryIO) -> tuple[bytes, dict[str, Any] | None]:
    """The bytes of the first message (its headers and body) and the message, or None when they
    do not make a JSON object (pygls's reader then answers them as it would have)."""
    raw = bytearray()
    length = None
    while True:
        line = stream.readline()
        raw += line
        if not line:
            return bytes(raw), None  # the editor closed the stream
        match = _CONTENT_LENGTH.match(line)
        if match:
            length = int(match.group(1))
        elif not line.strip():
            break
        elif not line.lower().startswith(b"content-type"):
            return bytes(raw), None  # not a header we know: leave it all to pygls's reader
    if length is None or length > _MAX_EARLY_BYTES:
        return bytes(raw), None
    body = stream.read(length)
    raw += body
    try:
        message = json.loads(body)
    except ValueError:
        return bytes(raw), None
    return bytes(raw), message if isinstance(message, dict) else None


def answer_initialize(message: dict[str, Any] | None, version: str) -> bytes | None:
    """The framed response to ``message`` when it is a well-formed ``initialize`` request."""
    if message is None or message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    msg_id, params = message.get("id"), message.get("params")
    if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)) or not isinstance(params, dict):
        return None
    if not isinstance(params.get("capabilities"), dict):
        return None  # pygls refuses it as invalid params: let it answer
    result = {
        "capabilities": capabilities(position_encoding(params)),
        "serverInfo": {"name": "recompile-fix", "version": version},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result})
    return (
        f"Content-Length: {len(body)}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{body}"
    ).encode("utf-8")


class PrefixedReader:
    """pygls's stdin reader, first giving back the bytes ``read_first_message`` consumed."""

    def __init__(self, prefix: bytes, reader: Any):
        self._prefix = prefix
        self._reader = reader

    async def readline(self) -> bytes:
        if self._prefix:
            end = self._prefix.find(b"\n") + 1 or len(self._prefix)
            line, self._prefix = self._prefix[:end], self._prefix[end:]
            if line.endswith(b"\n"):
                return line
            return line + await self._reader.readline()  # the stream ended mid-line
        return await self._reader.readline()

    async def readexactly(self, n: int) -> bytes:
        taken, self._prefix = self._prefix[:n], self._prefix[n:]
        if len(taken) < n:
            rest = await self._reader.readexactly(n - len(taken))
            return taken + rest if rest else taken
        return taken
