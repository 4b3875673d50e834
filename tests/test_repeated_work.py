"""What the rules and the language server ask again and again is worked out once: a node's
children (libcst rebuilds the node to list them), the names a new binding must avoid (a visit of
the whole scope), whether a line's ``torch`` is shadowed (a walk of the file), lsprotocol's
converter (made anew by ``get_converter()``, about 10 ms a diagnostic). Kept answers are the
fresh ones, and a caller that adds to a kept set of names does not change it.
`python bench/lsp_latency.py`: after an edit, p50 122-133 -> 55-64 ms."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import lsprotocol.converters

from recompile_fix.analysis import cst_walk
from recompile_fix.analysis.cst_walk import children, walk
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


def _libcsts_walk(root: cst.CSTNode) -> list[cst.CSTNode]:
    stack, found = [root], []
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(reversed(node.children))
    return found


def test_a_nodes_children_are_libcsts_listed_once_while_kept(monkeypatch):
    module = cst.parse_module(PROGRAM)
    listed = []
    real = cst.CSTNode.children
    counted = property(lambda node: listed.append(node) or real.fget(node))
    monkeypatch.setattr(cst.CSTNode, "children", counted)
    expected = _libcsts_walk(module)
    listed.clear()
    first = list(walk(module))
    assert len(first) == len(expected) and all(a is b for a, b in zip(first, expected))
    branches = [node for node in first if type(node).children is counted]  # a leaf lists none at no cost
    assert len(listed) == len(branches) < len(first)
    assert all(a is b for a, b in zip(walk(module), first)) and len(listed) == len(branches)  # kept
    for node in first[:50]:
        assert all(a is b for a, b in zip(children(node), real.fget(node)))
    # Past the bound every kept list is let go (a long editor session), and listed again.
    monkeypatch.setattr(cst_walk, "_CHILDREN_KEPT", 10)
    cst_walk._CHILDREN.clear()
    again = list(walk(module))
    assert all(a is b for a, b in zip(again, first)) and len(cst_walk._CHILDREN) <= 10


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
