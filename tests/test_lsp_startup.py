"""`initialize` is answered before pygls is loaded (recompile_fix/lsp/early.py): the answer must be
the one pygls gives for the same client, sent once, and the session after it the same as if pygls
had answered. Raw JSON-RPC over a spawned server's pipes, as an editor speaks it."""

import json
import subprocess
import sys

import pytest

from recompile_fix.lsp.early import PrefixedReader, answer_initialize, read_first_message

PYGLS_ANSWERS = "from recompile_fix.lsp.server import serve; serve(answer_early=False)"


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _messages(stdout: bytes) -> list[dict]:
    out = []
    while stdout:
        header, _, rest = stdout.partition(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in header.split(b"\r\n") if h.lower().startswith(b"content-length"))
        out.append(json.loads(rest[:length]))
        stdout = rest[length:]
    return out


def _session(argv: list[str], capabilities: dict, root_uri: str) -> list[dict]:
    """Everything the server wrote for initialize, initialized, a hover on a file not open,
    shutdown and exit."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": root_uri, "capabilities": capabilities},
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": root_uri + "/x.py"}, "position": {"line": 0, "character": 0}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    done = subprocess.run(argv, input=b"".join(map(_frame, messages)), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [m for m in _messages(done.stdout) if "id" in m and "method" not in m]  # the responses


CLIENTS = [
    {},
    {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
    {"general": {"positionEncodings": ["utf-32"]}},
    {"general": {"positionEncodings": ["latin-1"]}},
    {"workspace": {"workspaceFolders": True, "didChangeWatchedFiles": {"dynamicRegistration": False}}},
    {"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}}},
]


@pytest.mark.slow  # two language servers started per client, six clients: seconds, no torch
@pytest.mark.parametrize("capabilities", CLIENTS, ids=range(len(CLIENTS)))
def test_the_early_answer_is_the_one_pygls_gives_and_is_given_once(tmp_path, capabilities):
    root = tmp_path.as_uri()
    early = _session([sys.executable, "-m", "recompile_fix", "lsp"], capabilities, root)
    pygls = _session([sys.executable, "-c", PYGLS_ANSWERS], capabilities, root)
    assert [r["id"] for r in early] == [1, 2, 3]  # initialize answered once, and the rest in order
    assert early == pygls


def test_a_first_message_that_is_not_initialize_is_left_to_pygls():
    """A request before initialize is refused by the lifecycle (ServerNotInitialized), a broken
    first message answered as unreadable: lsp/early.py answers neither."""
    hover = {"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": {}}
    assert answer_initialize(hover, "0") is None
    for bad in (
        {"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": []}},
        {"jsonrpc": "2.0", "method": "initialize", "params": {"capabilities": {}}},
    ):
        assert answer_initialize(bad, "0") is None
    done = subprocess.run(
        [sys.executable, "-m", "recompile_fix", "lsp"],
        input=_frame(hover) + b"Content-Length: 5\r\n\r\nnope!" + _frame({"jsonrpc": "2.0", "method": "exit"}),
        capture_output=True,
        timeout=60,
    )
    errors = {m["id"]: m["error"]["code"] for m in _messages(done.stdout) if "error" in m}
    assert errors == {7: -32002}  # ServerNotInitialized; the unreadable body had no id to answer
    assert done.returncode == 1  # and the exit notification still obeyed (1: without shutdown)


def test_the_bytes_read_early_are_read_again_by_pygls(tmp_path):
    import asyncio
    import io

    stream = io.BytesIO(
        _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}) + b"rest\n"
    )
    prefix, message = read_first_message(stream)
    assert message is not None and message["id"] == 1

    class Rest:
        async def readline(self):
            return stream.readline()

        async def readexactly(self, n):
            return stream.read(n)

    async def replay():
        reader = PrefixedReader(prefix, Rest())
        header = await reader.readline()
        blank = await reader.readline()
        body = await reader.readexactly(int(header.split(b":")[1]))
        return header, blank, json.loads(body), await reader.readline()

    header, blank, body, after = asyncio.run(replay())
    assert header.startswith(b"Content-Length") and blank == b"\r\n" and body["id"] == 1 and after == b"rest\n"
