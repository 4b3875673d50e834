"""Where a guard's source is at the user's call: the expression in the user's code that holds the
tensor torch guarded, through whatever wrappers lie between (``functools.wraps`` decorators that
take ``*args, **kwargs``, ``nn.Module.__call__``, a compiled module's ``OptimizedModule``).

* ``kwargs['input_ids']`` -> the call's ``input_ids=`` argument, or ``batch['input_ids']`` where
  the call is ``model(**batch)``;
* ``args[1]`` -> the call's positional argument 1, or 0 where ``self`` is ``args[0]`` (a
  ``(*args, **kwargs)`` wrapper installed as a module's ``forward``);
* ``x`` (a parameter of the compiled function) -> its keyword or positional argument;
* ``self.cache.layers[0].keys`` -> ``step.cache.layers[0].keys``, where ``step`` is the module
  the call calls;
* then any attribute and item chain (``.layers[0].keys``) on what the call passes.

Where library code made the call (``model.generate()``), only what the user's own frame holds
(the recorder's ``held_by``: the same object) is reachable, and only as it is: the library may
replace what hangs off it (a cache's layers) between its calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from recompile_fix.analysis.cst_walk import dotted_name
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.profile.model import Compile, Frame
from recompile_fix.profile.sources import SourcePath, Step, parse_source

__all__ = ["Base", "CallTarget", "library_frame", "locate", "signature_of"]


@dataclass(frozen=True)
class Base:
    """What a target hangs off at the call: an argument (by keyword or position), the mapping a
    ``**`` argument unpacks, or an expression the user's code holds (the callee module, a name)."""

    keyword: str | None = None
    index: int | None = None
    star: bool = False
    expr: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.keyword is not None:
            return {"keyword": self.keyword}
        if self.index is not None:
            return {"index": self.index}
        if self.star:
            return {"star": True}
        return {"expr": self.expr}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Base":
        return cls(data.get("keyword"), data.get("index"), bool(data.get("star")), data.get("expr"))


@dataclass(frozen=True)
class CallTarget:
    source: str  # the guard source, as torch spells it
    base: Base
    steps: tuple[Step, ...]  # from the base to the tensor
    param: str | None = None  # the compiled function's parameter, where the tensor is one


def signature_of(frame: Frame, project: Project) -> dict[str, Any] | None:
    """How the compiled code takes its arguments: recorded, else read from its source."""
    if frame.signature is not None:
        return frame.signature
    source = project.source(frame.file)
    func = source.function_def(frame.first_line, frame.name) if source else None
    if func is None:
        return None
    params = func.params
    star_arg = params.star_arg
    return {
        "positional": [p.name.value for p in (*params.posonly_params, *params.params)],
        "keyword_only": [p.name.value for p in params.kwonly_params],
        "varargs": star_arg.name.value if isinstance(star_arg, cst.Param) else None,
        "varkw": params.star_kwarg.name.value if params.star_kwarg is not None else None,
    }


def locate(
    frame: Frame,
    compiles: list[Compile],
    guard_source: str,
    call: cst.Call,
    source: SourceFile,
    signature: dict[str, Any] | None,
) -> tuple[CallTarget | None, str | None]:
    """The expression at ``call`` that holds ``guard_source`` of ``frame``: (target, None), or
    (None, why not)."""
    path = parse_source(guard_source)
    if path is None:
        return None, f"`{guard_source}` is not an attribute or item chain"
    library = next((c.library_frames for c in compiles if c.library_frames), [])
    if library:
        return _held(path, guard_source, compiles, library)
    if signature is None:
        if path.root == "args" and path.steps and path.steps[0].is_index:
            # A compiled builtin module (nn.Sequential): torch's wrapper takes *args.
            return _positional(call, int(path.steps[0].key), path.steps[1:], guard_source, None)
        return None, f"cannot read how `{frame.name}` takes its arguments"
    root, steps = path.root, path.steps
    positional = list(signature.get("positional") or [])
    param = root if not steps else None
    if root == signature.get("varkw"):
        if not steps or steps[0].kind != "item" or not isinstance(steps[0].key, str):
            return None, f"`{guard_source}` is not an item of `**{root}`"
        return _keyword(call, steps[0].key, steps[1:], guard_source, None)
    if root == signature.get("varargs"):
        if not steps or not steps[0].is_index:
            return None, f"`{guard_source}` is not an item of `*{root}`"
        index = int(steps[0].key)
        if not positional and _module_at(compiles, f"{root}[0]"):
            index -= 1  # a (*args, **kwargs) wrapper installed as forward: self is args[0]
        if index < 0:
            return _owner(call, frame, steps[1:], guard_source)
        index += max(0, len(positional) - _bound(positional, compiles, call))
        return _positional(call, index, steps[1:], guard_source, None)
    if root in positional:
        bound = _bound(positional, compiles, call)
        if bound and root == positional[0]:
            return _owner(call, frame, steps, guard_source)
        if _keyword_arg(call, root) is not None:
            return _keyword(call, root, steps, guard_source, param)
        return _positional(call, positional.index(root) - bound, steps, guard_source, param, root)
    if root in (signature.get("keyword_only") or []):
        return _keyword(call, root, steps, guard_source, param)
    return None, f"`{root}` is not a parameter of `{frame.name}`"


def _bound(positional: list[str], compiles: list[Compile], call: cst.Call) -> int:
    """1 when the compiled function is called as a method (its ``self`` comes with the callee).
    A first parameter that holds a module is ``self`` only where the call does not pass it: a
    compiled ``train_step(model, batch)`` is called with the model as its first argument."""
    if not positional:
        return 0
    if positional[0] in ("self", "cls"):
        return 1
    if not _module_at(compiles, positional[0]):
        return 0
    if any(a.star for a in call.args) or _keyword_arg(call, positional[0]) is not None:
        return 0 if _keyword_arg(call, positional[0]) is not None else 1
    passed = len(_positional_args(call)) + sum(
        1 for a in call.args if a.keyword is not None and a.keyword.value in positional
    )
    return 0 if passed >= len(positional) else 1


def _module_at(compiles: list[Compile], source: str) -> bool:
    return any(c.inputs.get(source, {}).get("type") == "Module" for c in compiles)


def _keyword_arg(call: cst.Call, keyword: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)


def _star_kwargs(call: cst.Call) -> cst.Arg | None:
    stars = [a for a in call.args if a.star == "**"]
    return stars[0] if len(stars) == 1 else None


def _positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and a.star != "**"]


def _keyword(
    call: cst.Call, keyword: str, steps: tuple[Step, ...], guard_source: str, param: str | None
) -> tuple[CallTarget | None, str | None]:
    if _keyword_arg(call, keyword) is not None:
        return CallTarget(guard_source, Base(keyword=keyword), steps, param), None
    star = _star_kwargs(call)
    if star is not None:
        return CallTarget(guard_source, Base(star=True), (Step("item", keyword), *steps), param), None
    if any(a.star == "**" for a in call.args):
        return None, f"the call passes `{keyword}` through one of several `**` mappings"
    return None, f"the call does not pass `{keyword}`"


def _positional(
    call: cst.Call,
    index: int,
    steps: tuple[Step, ...],
    guard_source: str,
    param: str | None,
    name: str | None = None,
) -> tuple[CallTarget | None, str | None]:
    """Positional argument ``index``; past the last one, the parameter ``name`` may come from a
    ``**`` mapping."""
    args = _positional_args(call)
    if any(a.star == "*" for a in args[: index + 1]):
        return None, "the call passes *args"
    if index >= len(args):
        if name is not None and _star_kwargs(call) is not None:
            return _keyword(call, name, steps, guard_source, param)
        return None, f"the call does not pass positional argument {index}"
    return CallTarget(guard_source, Base(index=index), steps, param), None


def _owner(
    call: cst.Call, frame: Frame, steps: tuple[Step, ...], guard_source: str
) -> tuple[CallTarget | None, str | None]:
    """``self`` of the compiled method: the module the call calls (``step(x)``: ``step``, whose
    attributes a compiled module forwards), or the object of a method call (``obj.run(x)``)."""
    func = call.func
    owner: cst.BaseExpression = func
    if isinstance(func, cst.Attribute) and func.attr.value in (frame.name, "forward", "__call__"):
        owner = func.value
    text = dotted_name(owner)
    if not text:
        return None, "the call's callee is not a name or attribute the fix can name again"
    return CallTarget(guard_source, Base(expr=text), steps), None


def _held(
    path: SourcePath, guard_source: str, compiles: list[Compile], library: list[Any]
) -> tuple[CallTarget | None, str | None]:
    where = library_frame(library[-1])
    for depth in range(min(2, len(path.steps)) + 1):
        prefix = path.code(steps=path.steps[:depth])
        held = next((c.inputs[prefix]["held_by"] for c in compiles if c.inputs.get(prefix, {}).get("held_by")), None)
        if held is None:
            continue
        rest = path.steps[depth:]
        if rest:
            return None, (
                f"library code ({where}) passes `{prefix}`, which the user's code holds as `{held}`, but "
                f"it may replace what hangs off it (`{path.code(root='', steps=rest)}`) between its calls"
            )
        return CallTarget(guard_source, Base(expr=held), ()), None
    return (
        None,
        f"library code ({where}) passes `{guard_source}`; the user's code does not hold it (it is a copy or made there)",
    )


def library_frame(location: Any) -> str:
    """``transformers/generation/utils.py:4333 in _prefill``."""
    file = str(location.file).replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"`{location.function or '?'}` at {file}:{location.line}"
