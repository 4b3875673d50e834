"""The syntax tree's index (analysis/ast_tree.Tree): a def's nodes are indexed when a walk or a
question first reaches them, and every answer is the one a whole-file index gives."""

import ast
import textwrap

from recompile_fix.analysis.ast_tree import _SCOPES, Tree, _children

PROGRAM = textwrap.dedent(
    '''
    import torch
    from torch import nn


    def helper(x, scale=2):
        def inner(y):
            return [z * scale for z in y]

        return inner(x)


    class Block(nn.Module):
        """A block."""

        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        @torch.no_grad()
        def forward(self, x):
            for i in range(3):
                x = self.fc(x) + (lambda t: t)(x)
            return helper(x)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(4) for _ in range(2)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            try:
                pass
            except ValueError as exc:
                raise exc
            return x


    if __name__ == "__main__":
        Model()(torch.randn(2, 4))
    '''
)


def _under(node: ast.AST, skip_defs: bool = False) -> list[ast.AST]:
    """What a walk of ``node`` must give, by plain recursion in the children's order."""
    found: list[ast.AST] = []
    for child in _children(node):
        found.append(child)
        if not (skip_defs and isinstance(child, _SCOPES)):
            found.extend(_under(child, skip_defs))
    return found


def _parents(module: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in [module, *_under(module)] for child in _children(node)}


def test_the_lazy_index_answers_as_a_plain_recursion_for_every_node():
    module = ast.parse(PROGRAM)
    nodes = [module, *_under(module)]
    assert Tree(module).order == nodes and len(nodes) > 100
    parents = _parents(module)
    for node in nodes:
        if not hasattr(node, "lineno"):
            continue
        # A fresh tree per question: each starts from nothing indexed but the module's own scope.
        assert list(Tree(module).walk(node)) == _under(node)
        assert list(Tree(module).walk(node, skip_defs=True)) == _under(node, skip_defs=True)
        chain, parent = [], parents.get(id(node))
        while parent is not None:
            chain.append(parent)
            parent = parents.get(id(parent))
        assert list(Tree(module).ancestors(node)) == chain
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            want = [n for statement in body for n in [statement, *_under(statement)]]
            assert list(Tree(module).walk_body(body)) == want
            want = [n for s in body for n in [s, *([] if isinstance(s, _SCOPES) else _under(s, True))]]
            assert list(Tree(module).walk_body(body, skip_defs=True)) == want


def test_a_walk_of_one_method_indexes_that_method_and_no_other():
    module = ast.parse(PROGRAM)
    tree = Tree(module)
    model = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    init = model.body[0]
    names = [n.attr for n in tree.walk(init, skip_defs=True) if isinstance(n, ast.Attribute)]
    assert "blocks" in names
    indexed = {id(f) for f in (init,)}
    defs = [n for n in ast.walk(module) if isinstance(n, ast.FunctionDef)]
    assert {id(d) for d in defs if id(d) in tree._defs} == indexed  # helper, inner, forwards: not yet


def test_a_node_reached_through_fields_is_found_in_its_def():
    """``func.body[0]`` of a def no walk reached: its def (and the def around that) is indexed
    by the node's lines, not the whole file."""
    module = ast.parse(PROGRAM)
    tree = Tree(module)
    helper = module.body[2]
    inner = helper.body[0]
    statement = inner.body[0]
    assert [type(n).__name__ for n in tree.ancestors(statement)][:3] == ["FunctionDef", "FunctionDef", "Module"]
    assert len(tree._defs) == 2  # helper and inner: the classes' methods are not indexed
    assert list(tree.walk_body(inner.body)) == list(Tree(module).walk_body(inner.body))
