"""Guard sources as torch spells them, taken apart: ``kwargs['past_key_values'].layers[0].keys`` is
the local ``kwargs``, then the item ``'past_key_values'``, the attribute ``layers``, the item
``0`` and the attribute ``keys``. The recorder keys the shapes it records the same way, so a
guard's source and a recorded argument meet on one spelling. Standard library only."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = [
    "SourcePath",
    "Step",
    "attribute_path",
    "canonical_source",
    "guard_words",
    "is_resume_stack",
    "module_path_code",
    "parse_source",
    "shown_source",
    "source_of_expression",
    "strip_local_scope",
]

_ROOT = re.compile(r"[A-Za-z_]\w*")
_ATTR = re.compile(r"\.([A-Za-z_]\w*)")
_ITEM = re.compile(r"""\[\s*(-?\d+|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*\]""")


@dataclass(frozen=True)
class Step:
    """One step from an object to what it holds: ``.name`` (kind "attr") or ``[key]`` ("item"),
    where an int key indexes a list or tuple and a str key a dict."""

    kind: str  # "attr" / "item"
    key: str | int

    def code(self) -> str:
        return f".{self.key}" if self.kind == "attr" else f"[{self.key!r}]"

    @property
    def is_index(self) -> bool:
        return self.kind == "item" and isinstance(self.key, int)


@dataclass(frozen=True)
class SourcePath:
    root: str
    steps: tuple[Step, ...] = ()

    def code(self, root: str | None = None, steps: tuple[Step, ...] | None = None) -> str:
        return (root if root is not None else self.root) + "".join(
            s.code() for s in (self.steps if steps is None else steps)
        )

    def __str__(self) -> str:
        return self.code()


def parse_source(text: str) -> SourcePath | None:
    """``kwargs['input_ids']`` -> SourcePath("kwargs", (item 'input_ids',)); None for anything
    that is not a plain chain of attributes and constant items (``len(x)``, ``G['f'].__code__``
    parses; a call does not)."""
    text = text.strip()
    match = _ROOT.match(text)
    if not match:
        return None
    steps: list[Step] = []
    at = match.end()
    while at < len(text):
        attr = _ATTR.match(text, at)
        if attr:
            steps.append(Step("attr", attr.group(1)))
            at = attr.end()
            continue
        item = _ITEM.match(text, at)
        if item:
            steps.append(Step("item", ast.literal_eval(item.group(1))))
            at = item.end()
            continue
        return None
    return SourcePath(match.group(0), tuple(steps))


def module_path_code(path: str) -> str:
    """A submodule's path as ``named_modules()`` spells it, as Python reaches it from its owner:
    ``up_blocks.0.resnets`` -> ``.up_blocks[0].resnets`` (a ModuleList's or Sequential's child
    by index: the recorder keeps a digit step only there)."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split("."))


# ``self.__dict__['_modules']['drop'].p`` is ``self._modules['drop'].p``: torch spells an
# instance attribute either way (a module reached through a property, 2.13); the rules match one.
_DICT_ATTRIBUTE = re.compile(r"""\.__dict__\[(['"])([A-Za-z_]\w*)\1\]""")


_NUMBER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)


def source_of_expression(source: str | None) -> str | None:
    """The one guardable source an arithmetic guard is computed from (``(1.0 + ((-1)*self.p))``:
    ``self.p``), spelled as torch spells sources; None for a plain source, or anything else."""
    if not source or not source.startswith("(") or not any(op in source for op in "+-*/"):
        return None
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError:
        return None
    chains: set[str] = set()

    def walk(node: ast.AST) -> bool:
        if isinstance(node, ast.BinOp) and isinstance(node.op, _NUMBER_OPS):
            return walk(node.left) and walk(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, _NUMBER_OPS):
            return walk(node.operand)
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and parse_source(ast.unparse(node)):
            chains.add(ast.unparse(node))
            return True
        return False

    return next(iter(chains)) if walk(tree) and len(chains) == 1 else None


def canonical_source(source: str | None) -> str | None:
    """A guarded expression as the rules match it: instance attributes read through
    ``__dict__`` spelled as attributes (Profiles recorded before this are read the same way)."""
    return _DICT_ATTRIBUTE.sub(r".\2", source) if source and "__dict__[" in source else source


_SUBMODULE = re.compile(r"""\._modules\[['"](\w+)['"]\]""")


def attribute_path(source: str) -> str:
    """A guard's source with torch's submodule spelling read as attributes: the counter of a
    module a compiled model holds (``self._modules['dec'].num_updates``) is ``self.dec.num_updates``."""
    return _SUBMODULE.sub(r".\1", source)


_LOCAL_SCOPE = re.compile(r"""L\[\s*['"](.*?)['"]\s*\]""")


def strip_local_scope(text: str) -> str:
    """``L['x']`` (torch < 2.13, and guards' code parts) -> ``x``, as torch 2.13 prints it."""
    return _LOCAL_SCOPE.sub(r"\1", text)


# A resume function's inputs that were on the stack at the graph break (``___stack1``): a value
# the code computed before the break, no name of the program's.
_RESUME_STACK = re.compile(r"^___stack\d+$")


def is_resume_stack(source: str | None) -> bool:
    return bool(source and _RESUME_STACK.match(source))


def shown_source(source: str) -> str:
    """A guard's source as a report shows it, in backquotes: torch's name for a value carried
    across a graph break says what it is."""
    return f"`{source}` (a value computed before a graph break)" if is_resume_stack(source) else f"`{source}`"


# A guard's expression in torch's failure line: `0/0: not cache.is_updated   # ...source line...`.
_GUARD_WORDS = re.compile(r"^\s*(?:\d+/\d+:\s*)?([^#]*)")


def guard_words(text: str) -> str:
    """A guard as torch wrote it in a failure (`not cache.is_updated`), without its entry and
    source comment, at most 80 characters: what a reason no kind describes is shown as."""
    match = _GUARD_WORDS.match(text.split("\n", 1)[0])
    words = match.group(1).strip() if match else ""
    return words if len(words) <= 80 else words[:77] + "..."
