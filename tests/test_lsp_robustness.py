"""The language server under bad input: every request answered (an error for params that do not
fit, such as a negative position), a header it cannot read (`Content-Length: abc`) costs that
message only, and a Profile that becomes unreadable takes its fixes with it. Before: such
requests were never answered, the bad header left the server alive but deaf, and a malformed
Profile logged a traceback and kept the old fixes."""

from __future__ import annotations

import json

import pytest
from lsprotocol import types as lsp

from lsp_client import TIMEOUT, RawClient
from test_lsp import diagnostics_for, open_doc, rf001, session, until


@pytest.fixture
def raw(project):
    client = RawClient(project)
    client.send({"id": 1, "method": "initialize", "params": {"capabilities": {}, "rootUri": project.as_uri()}})
    assert "capabilities" in client.response(1)["result"]
    client.send({"method": "initialized", "params": {}})
    yield client
    if client.proc.poll() is None:
        client.proc.kill()


def _hover(msg_id: int, uri: str, line, character) -> dict:
    return {
        "id": msg_id,
        "method": "textDocument/hover",
        "params": {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
    }


def test_every_request_is_answered(raw, project):
    uri = (project / "main.py").as_uri()
    text = (project / "main.py").read_text()
    raw.send(
        {
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        }
    )
    raw.send(_hover(2, uri, -1, 0))  # a negative position
    assert raw.response(2)["error"]["code"] == -32602
    raw.send(_hover(3, uri, "one", 0))  # a string for a number
    assert raw.response(3)["error"]["code"] == -32602
    raw.send({"id": 4, "method": "textDocument/codeAction", "params": {"textDocument": 5}})
    assert raw.response(4)["error"]["code"] == -32602
    raw.send(_hover(5, uri, 10**6, 10**6))  # past the end: a valid request, no hover
    assert raw.response(5) == {"jsonrpc": "2.0", "id": 5, "result": None}
    raw.send({"id": 6, "method": "recompile-fix/no-such-method", "params": {}})
    assert raw.response(6)["error"]["code"] == -32601
    raw.close()
    assert raw.proc.returncode == 0


def test_a_bad_header_costs_that_message_only(raw, project):
    uri = (project / "main.py").as_uri()
    raw.send(_hover(2, uri, 0, 0), header=b"Content-Length: abc\r\n")
    raw.send(_hover(3, uri, 0, 0))
    assert raw.response(2)["error"]["code"] == -32700  # answered once the next header shows where it ended
    assert raw.response(3) == {"jsonrpc": "2.0", "id": 3, "result": None}
    body = b'{"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": {'  # not JSON
    raw.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert raw.response(4)["error"]["code"] == -32700
    raw.send(_hover(5, uri, 0, 0))
    assert raw.response(5)["result"] is None
    raw.close()


@pytest.mark.slow  # a language server waiting for a Profile to change, four times: seconds, no torch
@pytest.mark.asyncio
async def test_an_unreadable_profile_takes_its_fixes_with_it(project):
    main = project / "main.py"
    profile = project / ".recompile-fix" / "profile.json"
    recorded = profile.read_text()
    async with session(project) as client:
        uri = open_doc(client, main, main.read_text())
        assert len(rf001(await diagnostics_for(client, uri, 1))) == 1
        damaged_ones = (
            recorded[: len(recorded) // 2],  # truncated
            recorded.replace('"dim": 0', '"dim": "0"'),  # a string for a number
            recorded.replace('"reasons": []', '"reasons": [1]', 1),  # a number for a reason: a traceback before
        )
        for damaged in damaged_ones:
            profile.write_text(damaged)
            await until(client, lambda: rf001(client.diagnostics[uri]) == [])
            actions = await client.text_document_code_action_async(
                lsp.CodeActionParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    range=lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=99, character=0)),
                    context=lsp.CodeActionContext(diagnostics=[]),
                )
            )
            assert not any("RF001" in a.title for a in actions or [])
            profile.write_text(recorded)
            await until(client, lambda: len(rf001(client.diagnostics[uri])) == 1)


# -- the LSP lifecycle and framing (issue 32) ----------------------------------------------------
def _wait_exit(client: RawClient) -> int:
    code = client.proc.wait(timeout=TIMEOUT)
    client.proc.stderr.close()
    client.proc.stdout.close()
    return code


def test_requests_before_initialize_and_after_shutdown_are_answered_with_errors(project):
    client = RawClient(project)
    try:
        uri = (project / "main.py").as_uri()
        client.send(_hover(1, uri, 0, 0))
        assert client.response(1)["error"]["code"] == -32002  # ServerNotInitialized
        client.send({"method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri}}})  # dropped
        client.send({"id": 2, "method": "initialize", "params": {"capabilities": {}, "rootUri": project.as_uri()}})
        assert "capabilities" in client.response(2)["result"]
        client.send({"method": "initialized", "params": {}})
        client.send({"id": 3, "method": "initialize", "params": {"capabilities": {}}})
        assert client.response(3)["error"]["code"] == -32600  # only once
        client.send(_hover(4, uri, 0, 0))
        assert client.response(4) == {"jsonrpc": "2.0", "id": 4, "result": None}
        client.send({"id": 5, "method": "shutdown"})
        assert client.response(5)["result"] is None
        client.send(_hover(6, uri, 0, 0))
        assert client.response(6)["error"]["code"] == -32600  # InvalidRequest: shut down
        client.send({"method": "exit"})
        assert _wait_exit(client) == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()


def test_exit_without_shutdown_exits_1(raw):
    raw.send({"method": "exit"})
    assert _wait_exit(raw) == 1


def test_a_batch_is_answered_with_an_error_for_each_request(raw, project):
    uri = (project / "main.py").as_uri()
    batch = [
        {"jsonrpc": "2.0", **_hover(2, uri, 0, 0)},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", **_hover(3, uri, 0, 0)},
    ]
    body = json.dumps(batch).encode()
    raw.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert raw.response(2)["error"]["code"] == -32600
    assert raw.response(3)["error"]["code"] == -32600
    raw.send_raw(b"Content-Length: 2\r\n\r\n[]")  # no request in it: one error, no id
    assert raw.response(None)["error"]["code"] == -32600
    raw.send(_hover(4, uri, 0, 0))
    assert raw.response(4) == {"jsonrpc": "2.0", "id": 4, "result": None}
    raw.close()
    assert raw.proc.returncode == 0


def test_a_huge_content_length_costs_that_message_only(raw, project):
    uri = (project / "main.py").as_uri()
    raw.send(_hover(2, uri, 0, 0), header=b"Content-Length: 99999999999\r\n")
    raw.send(_hover(3, uri, 0, 0))
    answer = raw.response(2)
    assert answer["error"]["code"] == -32700 and "99999999999" in answer["error"]["message"]
    assert raw.response(3) == {"jsonrpc": "2.0", "id": 3, "result": None}
    raw.close()
    assert raw.proc.returncode == 0
