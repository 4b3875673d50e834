"""The shape of a Profile's JSON, checked before it is read (``Profile.from_json``): every field
has its type (an int is not a bool or a string, a list is a list), lines are >= 1, columns >= 0,
spans end after they start, numbers are finite, hashes are sha256, frames are named as code
objects are and every file named has a hash. A damaged or hand-edited Profile is one line and
exit code 2, never a traceback. (What the Profile says must also agree with itself and with the
files it profiled: ``validate``.)

Plain JSON in, nothing of the data model imported (the model calls this).
"""

from __future__ import annotations

import math
import re
from collections.abc import Container
from typing import Any

from recompile_fix.errors import UserError

__all__ = ["validate_profile_json"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CODE_NAME = re.compile(r"[^\W\d]\w*|<\w+>")  # a def's name, or <module>, <lambda>, <genexpr> ...
# torch's CompileId as str() spells it (frame/compile, `_attempt`, `!autograd/...`), a later
# generation's prefixed by us (`g1:0/0`): another id cannot come from torch.
_COMPILE_ID = re.compile(r"(?:g\d+:)?(?:!\d+(?:/\d+/\d+)?|\d+/\d+)(?:_\d+)?")
_MAX_LINE = 10_000_000  # no source file has more lines
MAX_DIM = 64  # torch's own limit on a tensor's rank
# A class's ``__qualname__``: dotted names, ``<locals>`` after a function's.
_QUALNAME = re.compile(r"[^\W\d]\w*(?:\.(?:<locals>|[^\W\d]\w*))*")


class _Invalid(Exception):
    pass


def validate_profile_json(data: Any, reason_kinds: Container[str]) -> None:
    """Raise UserError (one line) unless ``data`` has the shape of a Profile."""
    try:
        _check_profile(data, reason_kinds)
    except _Invalid as exc:
        raise UserError(f"damaged Profile: {exc}; profile the program again") from None


def _fail(where: str, what: str) -> None:
    raise _Invalid(f"{where} {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any, where: str, low: int = 0, high: int = 2**62, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not _is_int(value):
        _fail(where, f"is {_short(value)}, not an integer")
    if not low <= value <= high:
        _fail(where, f"is {_short(value)}, outside {low}..{high}")


def _short(value: Any) -> str:
    """``repr(value)`` for a one-line message, cut where long (a 4,000-digit line number)."""
    text = repr(value) if not _is_int(value) or abs(value) < 10**30 else f"a number of {len(str(abs(value)))} digits"
    return text if len(text) <= 80 else text[:60] + "..."


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _path(value: Any, where: str, optional: bool = False) -> None:
    """A file's path: a non-empty string without a control character (a NUL is no path the
    system takes; a newline would split the line that names it)."""
    if value is None and optional:
        return
    _str(value, where, empty=False)
    if _CONTROL.search(value):
        _fail(where, f"is {value!r}, a path with a control character")


_TORCH_VERSION = re.compile(r"\d+\.\d+")  # 2.13.0+cpu, 2.8.0a0+git1234567, 2.14.1


def _str(value: Any, where: str, optional: bool = False, empty: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or (not empty and not value):
        _fail(where, f"is {value!r}, not a{'' if empty else ' non-empty'} string")


def _seconds(value: Any, where: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        _fail(where, f"is {value!r}, not a number of seconds")
    if value < 0:
        _fail(where, f"is {value}, below zero")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(where, f"is {type(value).__name__}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        _fail(where, f"is {type(value).__name__}, not a list")
    return value


def _scalar(value: Any, where: str) -> None:
    """A guard's value: a JSON scalar, or a list or object of them (finite numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        _fail(where, f"is {value!r}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            _scalar(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _scalar(item, f"{where}.{key}")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        _fail(where, f"is {value!r}")


def _location(value: Any, where: str) -> None:
    data = _obj(value, where)
    _path(data.get("file"), f"{where}.file")
    _int(data.get("line"), f"{where}.line", 1, _MAX_LINE)
    _int(data.get("end_line"), f"{where}.end_line", data["line"], _MAX_LINE, optional=True)
    _int(data.get("col"), f"{where}.col", 0, 100_000, optional=True)
    _int(data.get("end_col"), f"{where}.end_col", 0, 100_000, optional=True)
    _str(data.get("function"), f"{where}.function", optional=True)
    if (
        data.get("col") is not None
        and data.get("end_col") is not None
        and data.get("end_line") in (None, data["line"])
        and data["end_col"] < data["col"]
    ):
        _fail(where, f"ends (column {data['end_col']}) before it starts (column {data['col']})")


def _check_profile(data: Any, reason_kinds: Container[str]) -> None:
    top = _obj(data, "the Profile")
    command = _list(top.get("command"), "command")
    for i, arg in enumerate(command):
        _str(arg, f"command[{i}]")
    _str(top.get("torch_version"), "torch_version", optional=True)
    if top.get("torch_version") is not None and not _TORCH_VERSION.match(top["torch_version"]):
        # Which fix a rule writes depends on it (findings/releases.py): a damaged one is no guess.
        _fail("torch_version", f"is {top['torch_version']!r}, not a torch version")
    _str(top.get("python_version", ""), "python_version")
    _str(top.get("tool_version"), "tool_version", optional=True)
    _str(top.get("backend"), "backend", optional=True)
    _int(top.get("exit_code"), "exit_code", -(2**31), 2**31, optional=True)
    for key in ("sources", "applied"):
        for path, digest in _obj(top.get(key, {}), key).items():
            _path(path, f"{key} key")
            if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
                _fail(f"{key}[{path!r}]", f"is {digest!r}, not a sha256 digest")
    for i, process in enumerate(_list(top.get("processes", []), "processes")):
        _obj(process, f"processes[{i}]")
    if top.get("interpreter") is not None:
        _check_interpreter(_obj(top["interpreter"], "interpreter"))
    sources = top.get("sources", {})
    for f, frame in enumerate(_list(top.get("frames"), "frames")):
        _check_frame(_obj(frame, f"frames[{f}]"), f"frames[{f}]", reason_kinds)
        named = [frame["file"]] + [s["file"] for c in frame.get("compiles", []) for s in c.get("stack", [])]
        for path in named:
            if path not in sources:
                _fail(f"frames[{f}]", f"names the file {path!r}, of which it records no hash")


def _check_interpreter(interpreter: dict[str, Any]) -> None:
    """Where the interpreter that ran keeps its libraries (optional): a prefix and path lists."""
    _path(interpreter.get("prefix"), "interpreter.prefix")
    for key in ("site", "stdlib"):
        for i, path in enumerate(_list(interpreter.get(key, []), f"interpreter.{key}")):
            _path(path, f"interpreter.{key}[{i}]")


def _check_frame(frame: dict[str, Any], where: str, reason_kinds: Container[str]) -> None:
    _path(frame.get("file"), f"{where}.file")
    _int(frame.get("first_line"), f"{where}.first_line", 1, _MAX_LINE)
    _str(frame.get("name"), f"{where}.name", empty=False)
    if not _CODE_NAME.fullmatch(frame["name"]):
        _fail(f"{where}.name", f"is {frame['name']!r}, not the name of a function")
    if frame.get("steady") is not None:
        steady = _obj(frame["steady"], f"{where}.steady")
        _int(steady.get("calls"), f"{where}.steady.calls", 1)
        _seconds(steady.get("seconds"), f"{where}.steady.seconds")
        _seconds(steady.get("cpu_seconds"), f"{where}.steady.cpu_seconds", optional=True)
    compiles = [
        _obj(c, f"{where}.compiles[{i}]") for i, c in enumerate(_list(frame.get("compiles", []), f"{where}.compiles"))
    ]
    for i, compile_ in enumerate(compiles):
        here = f"{where}.compiles[{i}]"
        _str(compile_.get("id"), f"{here}.id", empty=False)
        if not _COMPILE_ID.fullmatch(compile_["id"]):
            _fail(f"{here}.id", f"is {compile_['id']!r}, not a torch compile id (such as 0/1)")
        for j, location in enumerate(_list(compile_.get("stack", []), f"{here}.stack")):
            _location(location, f"{here}.stack[{j}]")
        for key, seconds in _obj(compile_.get("seconds", {}), f"{here}.seconds").items():
            _seconds(seconds, f"{here}.seconds.{key}", optional=True)
        for name, entry in _obj(compile_.get("inputs", {}), f"{here}.inputs").items():
            _check_input(_obj(entry, f"{here}.inputs[{name!r}]"), f"{here}.inputs[{name!r}]")
        _str(compile_.get("fail_type"), f"{here}.fail_type", optional=True)
        _str(compile_.get("fail_reason"), f"{here}.fail_reason", optional=True)
        if not isinstance(compile_.get("limit_hit", False), bool):
            _fail(f"{here}.limit_hit", f"is {compile_.get('limit_hit')!r}, not true or false")
        _int(compile_.get("rank"), f"{here}.rank", 0, 2**20, optional=True)
        _str(compile_.get("backend"), f"{here}.backend", optional=True, empty=False)
        if compile_.get("dims") is not None:
            for name, entries in _obj(compile_["dims"], f"{here}.dims").items():
                for j, entry in enumerate(_list(entries, f"{here}.dims[{name!r}]")):
                    _check_dim(_obj(entry, f"{here}.dims[{name!r}][{j}]"), f"{here}.dims[{name!r}][{j}]")
        if compile_.get("float_operands") is not None:
            for j, operand in enumerate(_list(compile_["float_operands"], f"{here}.float_operands")):
                _str(operand, f"{here}.float_operands[{j}]", empty=False)
        if compile_.get("blocks") is not None:
            for j, stack in enumerate(_list(compile_["blocks"], f"{here}.blocks")):
                _check_block_stack(_obj(stack, f"{here}.blocks[{j}]"), f"{here}.blocks[{j}]")
        for j, reason in enumerate(_list(compile_.get("reasons", []), f"{here}.reasons")):
            _check_reason(_obj(reason, f"{here}.reasons[{j}]"), f"{here}.reasons[{j}]", reason_kinds)
        for j, reason in enumerate(_list(compile_.get("also_failed") or [], f"{here}.also_failed")):
            _check_reason(_obj(reason, f"{here}.also_failed[{j}]"), f"{here}.also_failed[{j}]", reason_kinds)
    for i, graph_break in enumerate(_list(frame.get("graph_breaks", []), f"{where}.graph_breaks")):
        data = _obj(graph_break, f"{where}.graph_breaks[{i}]")
        _location(data.get("location"), f"{where}.graph_breaks[{i}].location")
        _str(data.get("reason", ""), f"{where}.graph_breaks[{i}].reason")
        _int(data.get("count", 1), f"{where}.graph_breaks[{i}].count", 1)
        if data.get("logger") is not None or data.get("logger_method") is not None:
            _str(data.get("logger"), f"{where}.graph_breaks[{i}].logger", empty=False)
            method = data.get("logger_method")
            if not isinstance(method, str) or not method.isidentifier():  # it is written as code
                _fail(f"{where}.graph_breaks[{i}].logger_method", f"is {_short(method)}, not a method name")


_BLOCK_FIELDS = {"path", "count", "block", "file", "line", "container", "argument", "owner", "graph_inputs"}
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# A submodule path as named_modules() spells it: a ModuleList's children by index
# (``up_blocks.0.resnets``, a diffusers UNet's ModuleList of ModuleLists).
_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(\.([A-Za-z_]\w*|\d+))*")
# torch's dtype names as the recorder writes them (``str(dtype)`` without ``torch.``).
_DTYPE = re.compile(
    r"(u?int(8|16|32|64)|float(16|32|64)|bfloat16|bool|complex(32|64|128)|float8_\w+|q(u?int8|int32|uint4x2))"
)


def _check_block_stack(stack: dict[str, Any], where: str) -> None:
    unknown = set(stack) - _BLOCK_FIELDS
    if unknown:
        _fail(where, f"has unknown fields {sorted(unknown)}")
    for key in ("path", "block"):
        _str(stack.get(key), f"{where}.{key}", empty=False)
    _path(stack.get("file"), f"{where}.file")
    for key in ("container", "argument", "owner"):
        _str(stack.get(key), f"{where}.{key}", optional=True)
    for key, pattern in (("path", _MODULE_PATH), ("argument", _DOTTED)):
        if isinstance(stack.get(key), str) and not pattern.fullmatch(stack[key]):
            _fail(f"{where}.{key}", f"is {stack[key]!r}, not an attribute path")
    _int(stack.get("count"), f"{where}.count", 1, 2**20)
    _int(stack.get("line"), f"{where}.line", 1, _MAX_LINE)
    _int(stack.get("graph_inputs"), f"{where}.graph_inputs", 0, 2**20, optional=True)


_DIM_FIELDS = {"dim", "state", "size", "tied", "excludes", "excluded_by"}


def _check_dim(entry: dict[str, Any], where: str) -> None:
    """A size the compile's graph traced as a symbol: kept dynamic, or specialised to ``size``
    (tied to the parameter ``tied``, where one had that size)."""
    unknown = set(entry) - _DIM_FIELDS
    if unknown:
        _fail(where, f"has unknown fields {sorted(unknown)}")
    _int(entry.get("dim"), f"{where}.dim", 0, MAX_DIM - 1)
    if entry.get("state") not in ("dynamic", "specialized"):
        _fail(f"{where}.state", f"is {entry.get('state')!r}, not dynamic or specialized")
    _int(entry.get("size"), f"{where}.size", 0, optional=entry["state"] == "dynamic")
    _str(entry.get("tied"), f"{where}.tied", optional=True, empty=False)
    for j, size in enumerate(_list(entry.get("excludes", []), f"{where}.excludes")):
        _int(size, f"{where}.excludes[{j}]", 0)
    _str(entry.get("excluded_by"), f"{where}.excluded_by", optional=True, empty=False)


def _check_input(entry: dict[str, Any], where: str) -> None:
    _str(entry.get("type"), f"{where}.type", empty=False)
    if entry["type"] == "Tensor":
        for key in ("shape", "stride"):
            if key in entry:
                values = _list(entry[key], f"{where}.{key}")
                if len(values) > MAX_DIM:
                    _fail(f"{where}.{key}", f"has {len(values)} dimensions")
                for d, size in enumerate(values):
                    _int(size, f"{where}.{key}[{d}]", 0 if key == "shape" else -(2**62))
        # Dims the program marked dynamic (recorder: `_dynamo_dynamic_indices`), and weakly
        # (`maybe_mark_dynamic`: `_dynamo_weak_dynamic_indices`).
        for key in ("marked", "maybe_marked"):
            if key in entry:
                marked = _list(entry[key], f"{where}.{key}")
                rank = len(entry["shape"]) if isinstance(entry.get("shape"), list) else MAX_DIM
                for d, dim in enumerate(marked):
                    _int(dim, f"{where}.{key}[{d}]", 0, rank - 1)
        if isinstance(entry.get("shape"), list) and isinstance(entry.get("stride"), list):
            if len(entry["shape"]) != len(entry["stride"]):
                _fail(where, f"has a shape of {len(entry['shape'])} dimensions and a stride of {len(entry['stride'])}")
        _str(entry.get("dtype"), f"{where}.dtype", optional=True)
        if isinstance(entry.get("dtype"), str) and not _DTYPE.fullmatch(entry["dtype"]):
            _fail(f"{where}.dtype", f"is {entry['dtype']!r}, not a torch dtype")
    elif entry["type"] in ("int", "float", "bool"):
        value = entry.get("value")
        expected: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,)}
        if not isinstance(value, expected[entry["type"]]) or (entry["type"] != "bool" and isinstance(value, bool)):
            _fail(f"{where}.value", f"is {value!r}, not a{'n' if entry['type'] == 'int' else ''} {entry['type']}")
        if isinstance(value, float) and not math.isfinite(value):
            _fail(f"{where}.value", f"is {value!r}")
    elif entry["type"] == "str" and "value" in entry:  # (without one: `held_by` alone, as 0.1.0 wrote)
        # What the recorder keeps: a short word-like setting, never a path or text (it is written
        # into the program as a literal).
        value = entry.get("value")
        _str(value, f"{where}.value", empty=False)
        assert isinstance(value, str)
        if len(value) > 120 or any(c in value for c in "/\\\n\r"):
            _fail(f"{where}.value", f"is {value!r}, not a setting the recorder keeps")
    if "qualname" in entry:  # a module's class by identity: its ``__qualname__`` ...
        _str(entry["qualname"], f"{where}.qualname", empty=False)
        if len(entry["qualname"]) > 500 or not _QUALNAME.fullmatch(entry["qualname"]):
            _fail(f"{where}.qualname", f"is {entry['qualname']!r}, not a class's qualified name")
    if "defined_in" in entry:  # ... and its file, spelled as the Profile spells paths
        _str(entry["defined_in"], f"{where}.defined_in", empty=False)
        if not entry["defined_in"].endswith((".py", ".ipynb")) or any(c in entry["defined_in"] for c in "\0\n\r"):
            _fail(f"{where}.defined_in", f"is {entry['defined_in']!r}, not a Python file")
    if "file" in entry:  # a module's class file (absolute, a Python file)
        defined_in = entry["file"]
        _path(defined_in, f"{where}.file")
        if not re.match(r"^(/|[A-Za-z]:[\\/])", defined_in) or not defined_in.endswith((".py", ".ipynb")):
            _fail(f"{where}.file", f"is {defined_in!r}, not the absolute path of a Python file")


def _check_reason(reason: dict[str, Any], where: str, reason_kinds: Container[str]) -> None:
    kind = reason.get("kind")
    if not isinstance(kind, str) or kind not in reason_kinds:
        _fail(f"{where}.kind", f"is {kind!r}, not a reason kind")
    _str(reason.get("text"), f"{where}.text")
    _str(reason.get("entry"), f"{where}.entry", optional=True)
    _str(reason.get("source"), f"{where}.source", optional=True)
    _int(reason.get("dim"), f"{where}.dim", 0, MAX_DIM - 1, optional=True)
    _str(reason.get("value_type"), f"{where}.value_type", optional=True)
    for key in ("expected", "actual", "value"):
        _scalar(reason.get(key), f"{where}.{key}")
    if reason.get("first_use") is not None:
        _location(reason["first_use"], f"{where}.first_use")
