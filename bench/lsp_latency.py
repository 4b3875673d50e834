"""Code-action latency of `recompile-fix lsp` on a 2,000-line file with a Profile.

Generates a program of about 2,000 lines whose compiled functions recompile (sizes change
between calls), records its Profile with `recompile-fix profile --backend eager`, starts the
server over stdio as an editor would, opens the file, waits for its diagnostics, and then
measures code-action round trips (request sent to answer read, in this client):

* warm: the cursor moves from diagnostic to diagnostic (and to lines with none) in the same
  buffer, ``--requests`` times: what an editor asks on every cursor move. The client cannot
  resolve edits lazily, so each answer carries its edits, fix-all's included.
* after an edit: a quick fix is applied (the buffer changes), and the next request comes at
  once: the server analyses the new text first.

Prints p50 and p95 of each. Target: warm p95 under 100 ms.

    python bench/lsp_latency.py [--requests 300] [--lines 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path


def generate(lines_wanted: int, frames: int = 10) -> str:
    lines = [
        '"""Generated for bench/lsp_latency.py: compiled steps whose input sizes change."""',
        "",
        "import torch",
        "",
        "",
    ]
    for k in range(frames):
        lines += ["@torch.compile", f"def step{k}(x, scale):", f"    return (x * {k + 2} + scale).relu()", "", ""]
    tail = ["def main():"]
    for k in range(frames):
        tail += [
            "    for n in range(3, 6):",
            f"        x{k} = torch.ones(n, 2)",
            f"        step{k}(x{k}, 1.0)",
            f"        step{k}(torch.zeros(n + 1, 2), 1.0)",
        ]
    tail += ["", "", 'if __name__ == "__main__":', "    main()"]
    i = 0
    while len(lines) + len(tail) + 9 <= lines_wanted:
        lines += [
            f"def helper_{i}(a, b):",
            f'    """Filler {i}: plain Python the server must still parse."""',
            "    c = a + b",
            "    d = c * 2",
            "    if d > 10:",
            "        d = d - 1",
            "    return d",
            "",
            "",
        ]
        i += 1
    while len(lines) + len(tail) < lines_wanted:
        lines.append("")
    return "\n".join(lines + tail) + "\n"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


class Client(LanguageClient):
    def __init__(self):
        super().__init__("lsp-latency-bench", "1")
        self.published: dict[tuple[str, int | None], list] = {}
        self.arrived = asyncio.Event()

        @self.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def publish(params: lsp.PublishDiagnosticsParams):
            self.published[(params.uri, params.version)] = params.diagnostics
            self.arrived.set()

    async def diagnostics(self, uri: str, version: int, timeout: float = 120) -> list:
        async def wait():
            while (uri, version) not in self.published:
                self.arrived.clear()
                await self.arrived.wait()
            return self.published[(uri, version)]

        return await asyncio.wait_for(wait(), timeout)


def apply_edits(text: str, uri: str, edit: lsp.WorkspaceEdit) -> str:
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(pos: lsp.Position) -> int:  # the generated file is ASCII: UTF-16 units are characters
        return starts[pos.line] + pos.character

    edits = sorted(
        ((offset(e.range.start), offset(e.range.end), i, e.new_text) for i, e in enumerate(edit.changes[uri])),
        key=lambda e: (e[0], e[1], e[2]),
    )
    for start, end, _, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return text


async def measure(work: Path, program: Path, requests: int) -> dict[str, list[float]]:
    client = Client()
    await client.start_io(sys.executable, "-m", "recompile_fix", "lsp", cwd=str(work))
    await client.initialize_async(
        lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=from_fs_path(str(work)))
    )
    client.initialized(lsp.InitializedParams())
    uri = from_fs_path(str(program))
    text = program.read_text()
    version = 1
    started = time.perf_counter()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )
    diagnostics = [d for d in await client.diagnostics(uri, version) if d.code == "RF001"]
    opened = time.perf_counter() - started
    if not diagnostics:
        raise SystemExit("no RF001 diagnostics: the Profile did not record recompiles")

    async def code_action(line: int, character: int) -> tuple[float, list]:
        position = lsp.Position(line=line, character=character)
        t0 = time.perf_counter()
        result = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=lsp.Range(start=position, end=position),
                context=lsp.CodeActionContext(diagnostics=[]),
            )
        )
        return time.perf_counter() - t0, result or []

    first, _ = await code_action(diagnostics[0].range.start.line, diagnostics[0].range.start.character)
    timings: dict[str, list[float]] = {"first": [first], "warm": [], "after an edit": []}
    lines = text.count("\n")
    for i in range(requests):
        if i % 4 == 3:  # a line without a diagnostic
            seconds, _ = await code_action((i * 37) % lines, 0)
        else:
            d = diagnostics[i % len(diagnostics)]
            seconds, _ = await code_action(d.range.start.line, d.range.start.character)
        timings["warm"].append(seconds)

    # Quick fixes one after another, as a user would take them: apply one, and the editor asks for
    # the actions at the next finding at once (before the debounced diagnostics): the server
    # analyses the new text inside that request.
    pending = sorted((d for d in diagnostics if d.data["safety"] == "safe"), key=lambda d: d.range.start.line)
    _, actions = await code_action(pending[0].range.start.line, pending[0].range.start.character)
    while True:
        fix = next(a for a in actions if a.title.startswith("Fix "))
        fixed = apply_edits(text, uri, fix.edit)
        shift = fixed.count("\n") - text.count("\n")  # lines the fix inserted above the next finding
        text, version = fixed, version + 1
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        pending = [
            lsp.Diagnostic(
                range=lsp.Range(
                    start=lsp.Position(line=d.range.start.line + shift, character=d.range.start.character),
                    end=lsp.Position(line=d.range.end.line + shift, character=d.range.end.character),
                ),
                message=d.message,
                data=d.data,
            )
            for d in pending[1:]
        ]
        if not pending:
            break
        seconds, actions = await code_action(pending[0].range.start.line, pending[0].range.start.character)
        timings["after an edit"].append(seconds)
    left = [d for d in await client.diagnostics(uri, version) if d.code == "RF001" and d.data["safety"] == "safe"]
    assert not left, "quick fixes left safe findings behind"
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    timings["open"] = [opened]
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--keep", default=None, metavar="DIR", help="Work in DIR (kept) instead of a temp dir.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lsp-latency-") as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        program = work / "program.py"
        program.write_text(generate(args.lines))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "recompile_fix",
                "profile",
                "--backend",
                "eager",
                "--",
                sys.executable,
                "program.py",
            ],
            cwd=work,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        timings = asyncio.run(measure(work, program, args.requests))
        lines = program.read_text().count("\n")
    print(f"recompile-fix lsp: {lines}-line file with a Profile, {args.requests} warm code-action requests")
    print(f"  open -> diagnostics:         {timings['open'][0] * 1000:7.1f} ms")
    print(f"  first code action:           {timings['first'][0] * 1000:7.1f} ms")
    for name in ("warm", "after an edit"):
        values = timings[name]
        if values:
            print(
                f"  {name + ':':<28} p50 {percentile(values, 50) * 1000:6.1f} ms   "
                f"p95 {percentile(values, 95) * 1000:6.1f} ms   (n={len(values)}, "
                f"max {max(values) * 1000:.1f} ms, mean {statistics.fmean(values) * 1000:.1f} ms)"
            )
    warm_p95 = percentile(timings["warm"], 95) * 1000
    print(f"  target warm p95 < 100 ms: {'met' if warm_p95 < 100 else 'NOT met'}")


if __name__ == "__main__":
    main()
