"""What a compile's own graph says about the sizes it took, read inside the user's process when
torch finishes the compile (its ``_compile`` frame still holds the ``OutputGraph``). Standard
library and torch's objects only, every one looked up with ``getattr``: a release without them
costs the record, never the user's compile.

* For each size torch traced as a symbol (automatic dynamic after a size changed, or a mark):
  the tensor and dimension it stands for (``shape_env.var_to_sources``), and whether the graph
  kept it dynamic or specialised it to one value (``shape_env.replacements``: a guard such as
  ``Eq(s0, 12)`` from a matmul with a weight, ``f"{x.shape[0]}"``, a comparison). A mark on a
  specialised dimension raises (``mark_dynamic``: ConstraintViolationError) or changes nothing
  (``maybe_mark_dynamic``).
* A specialised size equal to a dimension of a parameter the graph took (parameters' shapes are
  static): the parameter it is tied to (``fn._parameters['weight']`` of each head).

Also: whether a block stack's recorded path is one Python can spell from its owner
(``up_blocks.0.resnets`` -> ``up_blocks[0].resnets``, a ModuleList's children by index).
"""

from __future__ import annotations

import re
import sys
import types

from recompile_fix.profile.sources import strip_local_scope  # standard library only

__all__ = ["compiled_graph_dims", "float_constant_operands", "spellable_module_path"]

_MAX_DIMS = 256  # dims recorded per compile
_PARAMETER = "._parameters["


def spellable_module_path(root, path: str, torch) -> bool:
    """Is ``path`` (as ``named_modules()`` spells it) reachable from ``root`` by attributes and
    the int indexes of ModuleLists and Sequentials? A ModuleDict's key "0" or "layer-1" is not
    (a rule writing ``root.path[0]`` would raise)."""
    module = root
    for part in path.split("."):
        if part.isdigit():
            if not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
                return False
        elif not part.isidentifier():
            return False
        module = getattr(module, "_modules", {}).get(part)
        if module is None:
            return False
    return True


def compiled_graph_dims(start_depth: int = 2) -> dict[str, list[dict]] | None:
    """{torch's source of a tensor (``L['x']``): [{"dim", "state": "dynamic" | "specialized",
    "size" (specialised: the value), "tied" (a parameter's source)}]} for the compile torch is
    finishing ({}: no size traced as a symbol); None where its ``_compile`` frame or graph is not
    reachable. Never raises."""
    try:
        return _read(start_depth + 1)
    except Exception:  # never break the user's program over bookkeeping
        return None


def _compile_frame(depth: int) -> types.FrameType | None:
    """The ``_compile`` frame of the compile torch is finishing (it holds the ``OutputGraph``, the
    code and the call's locals), or None; the search starts ``depth`` frames above the caller's."""
    frame: types.FrameType | None = sys._getframe(depth + 1)
    while frame is not None and not (frame.f_code.co_name == "_compile" and "output" in frame.f_locals):
        frame = frame.f_back
    return frame


def _compile_output(depth: int):
    """The ``OutputGraph`` of the compile torch is finishing, or None."""
    frame = _compile_frame(depth + 1)
    return frame.f_locals.get("output") if frame is not None else None


def _read(depth: int) -> dict[str, list[dict]] | None:
    frame = _compile_frame(depth + 1)
    output = frame.f_locals.get("output") if frame is not None else None
    if frame is None or output is None:
        return None
    try:
        earlier = _note_shapes(frame)
    except Exception:  # the shapes are for `excludes` only: never the graph's dims
        earlier = []
    shape_env = getattr(output, "shape_env", None)
    var_to_sources = getattr(shape_env, "var_to_sources", None)
    if not isinstance(var_to_sources, dict):
        return None  # a failed compile (no graph), or a release that keeps it elsewhere
    if not var_to_sources:
        return {}
    replacements = getattr(shape_env, "replacements", None) or {}
    parameters = _parameter_sizes(output)
    found: dict[str, list[dict]] = {}
    dynamic: dict[tuple[str, int], tuple[object, dict]] = {}
    count = 0
    for symbol, sources in list(var_to_sources.items()):
        for source in list(sources or [])[:8]:
            tensor, dim = _size_source(source)
            if tensor is None or count >= _MAX_DIMS:
                continue
            entry: dict = {"dim": dim, "state": "dynamic"}
            value = _constant(replacements.get(symbol))
            if value is not None:
                entry = {"dim": dim, "state": "specialized", "size": value}
                tied = next((p for p, sizes in parameters if value in sizes and p != tensor), None)
                if tied is not None:
                    entry["tied"] = tied
            else:
                dynamic[(tensor, dim)] = (symbol, entry)
            found.setdefault(tensor, []).append(entry)
            count += 1
    try:
        _note_exclusions(shape_env, dynamic, earlier)
    except Exception:  # an expression sympy will not evaluate: no `excludes`, the dims stay
        pass
    return found


# Per compiled code: the tensor arguments' shapes at each earlier compile, by torch's source name
# (``L['x']``, ``L['args'][0]``): what a graph traced dynamic is held against.
_SHAPES: dict[tuple[str, int, str], list[dict[str, list[int]]]] = {}
_MAX_SHAPES = 16  # earlier compiles kept per code


def _note_shapes(frame: types.FrameType) -> list[dict[str, list[int]]]:
    """The shapes this code's earlier compiles took; this compile's are added after them."""
    code, values = frame.f_locals.get("code"), frame.f_locals.get("locals")
    if not isinstance(code, types.CodeType) or not isinstance(values, dict):
        return []
    import torch

    shapes: dict[str, list[int]] = {}
    for name, value in list(values.items())[:64]:
        items = [(f"L[{name!r}]", value)]
        if isinstance(value, (tuple, list)):
            items = [(f"L[{name!r}][{i}]", item) for i, item in enumerate(value[:16])]
        for source, item in items:
            if isinstance(item, torch.Tensor):
                shapes[source] = [int(n) for n in item.shape]
    seen = _SHAPES.setdefault((code.co_filename, code.co_firstlineno, code.co_name), [])
    earlier = list(seen)
    if len(seen) < _MAX_SHAPES:
        seen.append(shapes)
    return earlier


def _note_exclusions(shape_env, dynamic: dict[tuple[str, int], tuple[object, dict]], earlier: list[dict]) -> None:
    """``excludes`` on each dynamic size: the sizes earlier compiles took that this graph's own
    guards reject (a size derived from it that is 0 or 1 at the earlier one: a stride-32 network
    at 32 pixels), so that no mark made at that earlier call could have served both."""
    if not dynamic or not earlier:
        return
    import sympy  # type: ignore[import-untyped]  # torch's own dependency, in the user's process

    guards = [getattr(g, "expr", None) for g in list(getattr(shape_env, "guards", None) or [])[:512]]
    for shapes in earlier:
        values = {
            symbol: shapes[tensor][dim]
            for (tensor, dim), (symbol, _) in dynamic.items()
            if tensor in shapes and dim < len(shapes[tensor])
        }
        for expr in guards:
            symbols = getattr(expr, "free_symbols", None)
            if expr is None or not symbols or not symbols <= set(values):
                continue
            # A guard on one tensor's own sizes: one that ties it to another (a cache's length,
            # empty at a prefill) says the earlier call was another state, not another size.
            if len({tensor for (tensor, _), (symbol, _) in dynamic.items() if symbol in symbols}) != 1:
                continue
            if expr.xreplace({s: sympy.Integer(values[s]) for s in symbols}) is not sympy.false:
                continue
            for (tensor, dim), (symbol, entry) in dynamic.items():
                if symbol in symbols:
                    excluded = entry.setdefault("excludes", [])
                    if shapes[tensor][dim] not in excluded:
                        excluded.append(shapes[tensor][dim])
                    # The guard itself, in the sizes' own names: `17 <= x.size()[0] <= 64` (inductor's
                    # CPU reduction) is not the 0/1 specialisation `2 <= x.size()[0]` is.
                    entry.setdefault("excluded_by", _spelled(expr, dynamic)[:200])


def _spelled(expr, dynamic: dict[tuple[str, int], tuple[object, dict]]) -> str:
    """A guard over size symbols, each written as the size it stands for (``x.size()[0]``)."""
    lhs, op, rhs = (getattr(expr, k, None) for k in ("lhs", "rel_op", "rhs"))
    text = f"{lhs} {op} {rhs}" if op and lhs is not None else str(expr)  # `a != 1`, not `Ne(a, 1)`
    names = {
        str(symbol): f"{strip_local_scope(tensor)}.size()[{dim}]" for (tensor, dim), (symbol, _) in dynamic.items()
    }
    for symbol in sorted(names, key=len, reverse=True):  # `s10` before `s1`
        text = re.sub(rf"\b{re.escape(symbol)}\b", names[symbol], text)
    return text


def float_constant_operands(start_depth: int = 2) -> list[str] | None:
    """What the Python floats the compile's graph holds as constants (or as symbols, once made
    dynamic) meet in its ops: the ``dtype:rank`` of every tensor operand of an op with a float
    argument (``mul(x, 0.333)``: ``["float32:2"]``), distinct and sorted; None where the graph is not reachable. A float a
    program keeps in an attribute is such a constant: RF014 reads here whether a float64 0-d
    tensor in its place would compute the same (it does beside floating tensors of rank >= 1).
    Never raises."""
    try:
        graph = getattr(_compile_output(start_depth), "graph", None)
        nodes = getattr(graph, "nodes", None)
        if nodes is None:
            return None
        found: set[str] = set()
        for count, node in enumerate(nodes):
            if count > 20000:
                return None
            if getattr(node, "op", None) not in ("call_function", "call_method"):
                continue
            operands = [*getattr(node, "args", ()), *getattr(node, "kwargs", {}).values()]
            if not any(type(a) is float or _is_symbolic_float(a) for a in operands):
                continue
            for operand in operands:
                value = getattr(operand, "meta", {}).get("example_value") if hasattr(operand, "meta") else None
                dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
                if dtype is not None and shape is not None:
                    found.add(f"{str(dtype).replace('torch.', '')}:{len(shape)}")
        return sorted(found)
    except Exception:  # never break the user's program over bookkeeping
        return None


def _is_symbolic_float(operand) -> bool:
    """A graph node standing for a float made dynamic (its example value a SymFloat): where a
    float the program changed meets tensors once torch stopped specialising it."""
    meta = getattr(operand, "meta", None)
    return isinstance(meta, dict) and type(meta.get("example_value")).__name__ == "SymFloat"


def _size_source(source) -> tuple[str | None, int]:
    """``L['x'].size()[1]`` -> ("L['x']", 1); (None, 0) for any other source (a stride, an
    offset, an int argument)."""
    base = getattr(source, "base", None)
    index = getattr(source, "idx", None)
    name = _name(source)
    if base is None or type(index) is not int or not name.endswith(f".size()[{index}]"):
        return None, 0
    tensor = _name(base)
    if not tensor or name != f"{tensor}.size()[{index}]":
        return None, 0
    return tensor, index


def _name(source) -> str:
    name = getattr(source, "name", None)
    if callable(name):  # a method in older releases, a property in newer ones
        name = name()
    return name if isinstance(name, str) else ""


def _constant(value) -> int | None:
    """A replacement that is a plain integer (sympy's Integer), else None."""
    if value is None or not getattr(value, "is_Integer", False):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _parameter_sizes(output) -> list[tuple[str, set[int]]]:
    """The parameters the graph took, with their (static) sizes, from the tracked fakes."""
    found = []
    for tracked in list(getattr(output, "tracked_fakes", None) or [])[:4096]:
        name = _name(getattr(tracked, "source", None))
        if _PARAMETER not in name:
            continue
        shape = getattr(getattr(tracked, "fake", None), "shape", None)
        if shape is None:
            continue
        sizes = {s for s in shape if type(s) is int}
        if sizes:
            found.append((name, sizes))
    return found
