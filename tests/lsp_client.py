"""A raw JSON-RPC client of `recompile-fix lsp` over a spawned server's pipes: bytes as an
editor (careful or not) sends them, messages as the server writes them. For tests/test_lsp_*.py."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

from conftest import ROOT
from recompile_fix.lsp.first_open import CACHE_DIR_ENV

TIMEOUT = 60


class RawClient:
    """Bytes on stdin, messages from stdout: what a careless editor sends."""

    def __init__(self, root):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "recompile_fix", "lsp"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # A bare environment, as an editor may give; the session's cache folder kept (conftest).
            env={
                "PYTHONPATH": str(ROOT),
                "PATH": "/usr/bin:/bin",
                **{k: os.environ[k] for k in (CACHE_DIR_ENV,) if k in os.environ},
            },
        )
        self.buffer = b""

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict, header: bytes | None = None) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.send_raw((header or b"Content-Length: %d\r\n" % len(body)) + b"\r\n" + body)

    def receive(self) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while True:
            if b"\r\n\r\n" in self.buffer:
                head, rest = self.buffer.split(b"\r\n\r\n", 1)
                length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    return json.loads(rest[:length])
            assert time.monotonic() < deadline, "no answer from the server"
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                chunk = self.proc.stdout.read1(65536)
                assert chunk, "the server exited"
                self.buffer += chunk

    def response(self, msg_id) -> dict:
        while True:
            message = self.receive()
            if message.get("id") == msg_id and "method" not in message:
                return message

    def close(self) -> None:
        self.send({"id": 999, "method": "shutdown"})
        self.response(999)
        self.send({"method": "exit"})
        self.proc.wait(timeout=TIMEOUT)
        self.proc.stderr.close()
        self.proc.stdout.close()

    def until(self, method: str) -> list[dict]:
        """The messages the server sent, up to and including the first of ``method``."""
        seen = []
        while True:
            seen.append(self.receive())
            if seen[-1].get("method") == method:
                return seen
