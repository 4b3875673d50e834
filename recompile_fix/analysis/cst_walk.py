"""Walking a libcst tree: every node under one in source order, a node's children (kept, since
libcst rebuilds a node to list them), and the name tests the analyses share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

__all__ = ["children", "dotted_name", "is_name", "walk"]


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``root`` (itself first), depth first, in source order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


# libcst's ``children`` rebuilds the node (its own comment: "slow ... may need to cache this"), and
# the rules walk the same scopes again and again: each node's children are kept (nodes hash by
# identity), up to a bound past which all are let go (a long editor session).
_CHILDREN: dict[cst.CSTNode, Sequence[cst.CSTNode]] = {}
_CHILDREN_KEPT = 200_000  # nodes with children: about sixteen 2,000-line files
_LEAF: dict[type, bool] = {}  # a leaf's (libcst's BaseLeaf's) children: none, at no cost


def children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """``node.children``, worked out once while it is kept."""
    kind = type(node)
    leaf = _LEAF.get(kind)
    if leaf is None:  # read here, not on import: a command that never parses never loads libcst
        leaf = _LEAF[kind] = kind.children is cst.SimpleWhitespace.children
    if leaf:
        return ()
    kept = _CHILDREN.get(node)
    if kept is None:
        if len(_CHILDREN) >= _CHILDREN_KEPT:
            _CHILDREN.clear()
        kept = _CHILDREN[node] = node.children
    return kept


def is_name(node: object, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def dotted_name(node: cst.BaseExpression) -> str:
    """``a.b.c`` for a name or a chain of attributes of one; "" for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    return ""
