"""What a compiled function does with a tensor it receives, as far as a copy of it could tell:
writes into it (in place), hands it back or keeps it, or passes it to code the analysis does not
read. A copy at the call changes none of those values, but the caller's tensor no longer sees a
write, and what is handed back is the copy, not the caller's view."""

from __future__ import annotations

import ast

from recompile_fix.analysis.ast_tree import Def, dotted, in_place

__all__ = ["input_use"]

# Methods that give a view of their receiver (a write into it writes into the receiver).
_VIEWS = {
    "view", "view_as", "reshape", "reshape_as", "transpose", "permute", "squeeze", "unsqueeze", "expand",
    "expand_as", "narrow", "select", "t", "flatten", "unflatten", "as_strided", "unbind", "split", "chunk",
    "movedim", "swapaxes", "swapdims", "diagonal", "unfold", "detach", "contiguous", "T", "mT", "H", "real", "imag",
}  # fmt: skip
# Builtins that read a tensor and keep nothing of it.
_READERS = {
    "len", "isinstance", "type", "print", "float", "int", "bool", "str", "repr", "hasattr", "getattr", "range",
    "enumerate", "zip", "max", "min", "sum", "abs", "round",
}  # fmt: skip


def _root(node: ast.expr) -> str | None:
    """The name an expression reads through subscripts, attributes and view methods."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS:
            node = node.func.value
        else:
            return None


def input_use(func: Def, param: str, torch: set[str]) -> str | None:
    """Why a copy of ``param`` might not be the same to the caller, or None: the function writes
    into it or a view of it, returns or stores it, or passes it to a function other than torch's."""
    aliases = {param}
    changed = True
    while changed:  # names bound to the tensor or a view of it (`x = logits[:, :8]`)
        changed = False
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and _root(node.value) in aliases:
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in aliases:
                            aliases.add(name.id)
                            changed = True
    for node in ast.walk(func):
        if isinstance(node, ast.AugAssign) and _root(node.target) in aliases:
            return f"writes into `{param}` in place (line {node.lineno})"
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, (ast.Subscript, ast.Attribute)) and _root(target) in aliases:
                    return f"writes into `{param}` (line {node.lineno})"
                if isinstance(target, ast.Attribute) and _root(node.value) in aliases:
                    return f"keeps `{param}` on an object (line {node.lineno})"
        if isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if any(_root(v) in aliases and not isinstance(v, ast.Call) for v in values):
                return f"returns `{param}` or a view of it (line {node.lineno})"
        if isinstance(node, ast.Call):
            why = _call_use(node, param, aliases, torch)
            if why is not None:
                return why
    return None


def _call_use(call: ast.Call, param: str, aliases: set[str], torch: set[str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and _root(func.value) in aliases:
        if in_place(func.attr):
            return f"writes into `{param}` in place (`.{func.attr}`, line {call.lineno})"
        return None  # a method of the tensor: a new tensor, or a view (followed above)
    passed = [a for a in call.args if _root(a) in aliases] + [
        k.value for k in call.keywords if _root(k.value) in aliases
    ]
    if not passed:
        return None
    if any(k.arg == "out" and _root(k.value) in aliases for k in call.keywords):
        return f"writes into `{param}` (`out=`, line {call.lineno})"
    name = dotted(func) or ""
    if name in _READERS:
        return None
    if name.split(".")[0] in torch:
        leaf = name.rsplit(".", 1)[-1]
        return f"writes into `{param}` in place (`{name}`, line {call.lineno})" if in_place(leaf) else None
    return f"passes `{param}` to `{name or ast.unparse(func)}` (line {call.lineno}), which the analysis does not read"
