"""What the language server asks again for every fix set it tries is worked out once: the names
a new binding must avoid (a visit of the whole scope), whether a line's ``torch`` is shadowed (a
walk of the file), lsprotocol's converter (made anew by ``get_converter()``, about 10 ms a
diagnostic). Kept answers are the fresh ones, and a caller that adds to a kept set of names does
not change it. `python bench/lsp_latency.py`: after an edit, p50 122-133 -> 55-64 ms."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import lsprotocol.converters

from recompile_fix.analysis.source import SourceFile
from recompile_fix.lsp import server
from recompile_fix.lsp.items import Item

PROGRAM = textwrap.dedent(
    """\
    import torch


    @(lambda f: f)
    def step(x, torch=None):
        y = model(x)
        return [torch for torch in y]


    class Loop:
        torch = 1

        def run(self, x):
            global torch
            return step(x) + other(x)


    out = step(torch.ones(3))
    more = step(torch.zeros(2))
    """
)


def _calls(source: SourceFile) -> list[cst.Call]:
    return [n for n in source.nodes(cst.Call) if isinstance(n.func, cst.Name)]


def test_names_in_scope_are_found_once_a_scope_and_are_the_fresh_ones(monkeypatch):
    source = SourceFile.parse(Path("m.py"), PROGRAM)
    visits = []
    names_in = SourceFile._names_in
    monkeypatch.setattr(SourceFile, "_names_in", lambda self, scope: visits.append(scope) or names_in(self, scope))
    calls = _calls(source)
    for call in calls:
        fresh = SourceFile.parse(Path("m.py"), PROGRAM)
        (same,) = [c for c in _calls(fresh) if fresh.span(c) == source.span(call)]
        assert source.names_in_scope(call) == names_in(fresh, _scope(fresh, same))
    scopes = {id(_scope(source, call)) for call in calls}
    assert len(calls) > len(scopes) == len(visits)  # module level twice or more, each def once
    # A fix adds the names it binds to the set it was given: the kept one stays as it was.
    module_call = calls[-1]
    given = source.names_in_scope(module_call)
    given.add("a_name_a_fix_bound")
    assert "a_name_a_fix_bound" not in source.names_in_scope(module_call)


def _scope(source: SourceFile, node: cst.CSTNode) -> cst.CSTNode:
    return next((a for a in source.ancestors(node) if isinstance(a, cst.FunctionDef)), source.module)


def test_shadowed_at_kept_answers_are_the_fresh_ones():
    source = SourceFile.parse(Path("m.py"), PROGRAM)
    lines = range(1, PROGRAM.count("\n") + 2)
    kept = [[source.shadowed_at(line, name) for line in lines] for name in ("torch", "x", "y")]
    again = [[source.shadowed_at(line, name) for line in lines] for name in ("torch", "x", "y")]
    fresh = [
        [SourceFile.parse(Path("m.py"), PROGRAM).shadowed_at(line, name) for line in lines]
        for name in ("torch", "x", "y")
    ]
    assert kept == again == fresh
    # the def's parameter and the comprehension's variable shadow it; `global torch` does not
    assert kept[0][5] and kept[0][6] and not kept[0][14] and not kept[0][17]


def test_the_server_builds_lsprotocols_converter_once(monkeypatch):
    made = []
    real = lsprotocol.converters.get_converter
    monkeypatch.setattr(lsprotocol.converters, "get_converter", lambda: made.append(1) or real())
    server._converter.cache_clear()
    try:
        items = [Item(None, None, ((n, 0), (n, 4)), f"note {n}", "information", {"kind": "stale"}) for n in range(5)]
        diagnostics = [server._to_diagnostic(item) for item in items]
    finally:
        server._converter.cache_clear()
    assert len(made) == 1
    assert [d.message for d in diagnostics] == [f"note {n}" for n in range(5)]
    assert diagnostics[3].range.start.line == 3 and diagnostics[3].severity == 3
