"""Typed recompile reasons from torch's guard-failure text.

torch gives each failure as ``"<entry id>: <guard text>"`` plus, for non-tensor guards,
``  # <source line>  # <path tail>:<line> in <fn>`` and a ``User stack trace:`` block naming the
line that first used the value. Tensor guards name only the argument. What differs by release
(all parse to the same Reason):

* locals: ``tensor 'x'``, ``c == 0.5`` (2.8+); ``tensor 'L['x']'``, ``L['c'] == 0.5`` (2.6);
* the first use: the ``User stack trace:`` block (2.13+); only the comment (2.10), whose path is
  a tail (relative to the directory above torch's, see ``first_use_is_tail``); nothing (2.6, 2.8);
* the recompile-limit failure: ``Dynamo recompile limit exceeded ... Limit type: recompile_limit``
  (2.13+); ``RecompileLimitExceeded: recompile_limit reached`` (2.8, 2.10);
  ``cache_size_limit reached`` (2.6, whose config has no ``recompile_limit``).
"""

from __future__ import annotations

import ast
import re

from recompile_fix.profile.model import Location, Reason
from recompile_fix.profile.sources import parse_source, source_of_expression, strip_local_scope

__all__ = [
    "VALUE_KINDS",
    "first_use_is_tail",
    "is_limit_hit",
    "limit_hit_reason",
    "parse_reason",
    "parse_reasons",
    "strip_local_scope",
]

_ENTRY = re.compile(r"^\s*(!?[\d/]+):\s*", re.S)
_USER_STACK = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)(?:\n\s+(?P<code>.*))?')
_TENSOR = re.compile(r"^tensor '(?P<src>.+?)' (?P<what>[\w ]+?) mismatch(?P<rest>.*)$", re.S)
# The sizes end at the message or at its sentence: ``actual 12. Guard failed on a parameter, ...``.
_AT_INDEX = re.compile(r"at index (\d+)\. expected (\S+), actual (\S+?)\.?(?:\s|$)")
# ``Tensor device index mismatch. Expected device index to be 0, actual 1`` (cuda:0 -> cuda:1).
_DEVICE_INDEX = re.compile(r"Expected device index to be (\S+), actual (\S+)")
# ``requires_grad mismatch. expected requires_grad=0``: torch prints only the cached flag.
_REQUIRES_GRAD = re.compile(r"expected requires_grad=(\d)")
# The backend key leads a DispatchKeySet: ``DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU)``.
# torch checks dispatch keys before the device index, so cpu -> cuda/meta shows up here.
_BACKEND_KEY = re.compile(r"DispatchKeySet\((?:Sparse(?:Csr)?|Quantized|Nested)?(\w+)")
_EXPECTED_ACTUAL = re.compile(r"expected (.+?)(?:, actual (.+?))?\s*$")
_EQUALS = re.compile(r"^(?P<src>.+?) == (?P<value>.+)$")
# A relational guard on a number traced as a symbol: which side of a branch this graph is for.
_COMPARE = re.compile(r"^(?P<src>.+?) (?P<op><=|<|>=|>|!=) (?P<value>-?\d+(?:\.\d*)?(?:e-?\d+)?)$")
_OPTIMIZER = re.compile(r"\.param_groups\[(\d+)\]\[['\"](\w+)['\"]\](?:\[\d+\])?$")  # and ['betas'][0]
_GLOBAL = re.compile(r"""^G\[['"](\w+)['"]\]$""")
# ``self.scale``, and a held module's (``self._modules['dec'].n``, as torch spells it).
_ATTRIBUTE = re.compile(r"""^(\w+)((?:\.\w+|\.\_modules\[['"][\w.]+['"]\])*\.\w+)$""")
_SIZE_GUARD = re.compile(r"(?P<src>[\w.\[\]'\"]+?)\.size\(\)\[(?P<dim>\d+)\]")
# It names no tensor: a call brought a marked one where the graph was traced with it unmarked.
_DIM_MARKING = "_has_dynamo_dim_marking is present on runtime tensor but was absent at compile time"
_OFFSET_GUARD = re.compile(r"(?P<src>[\w.\[\]'\"]+?)\.storage_offset\(\)")
_STRIDE_GUARD = re.compile(r"(?P<src>[\w.\[\]'\"]+?)\.stride\(\)\[(?P<dim>\d+)\]")
_LEN = re.compile(r"^len\((?P<src>.+?)\) == (?P<value>\d+)$")
# An empty dict or list guarded by its truth (`**kwargs` of an empty dict: ``not kwargs``): its
# length, 0, as ``len(kwargs) == 0`` would say.
_EMPTY = re.compile(r"^not (?P<src>[A-Za-z_]\w*)$")
_HASATTR = re.compile(r"""^(?:not )?hasattr\((?P<obj>.+?), ['"](?P<attr>\w+)['"]\)$""")
# ``___dict_contains('a', o.__dict__)`` is an instance attribute; ``___dict_contains('a', d)`` a dict key.
_DICT_CONTAINS = re.compile(r"""___dict_contains\((?P<key>.+?), (?P<obj>.+?)(?P<instance>\.__dict__)?\)$""")
# Accessor failures name only the source: ``getattr failed on source o.a``, ``KeyError on self.extra``.
_MISSING = re.compile(r"^(?:getattr failed on source|KeyError on) (?P<src>.+)$")
_TYPE_ID = re.compile(r"___check_type_id\((?P<src>.+?), \d+\)(?:, type=<class '(?P<type>[^']+)'>)?")
# A tensor argument became something else: ``expected type of 'b' to be a tensor type, ' but found
# <class 'int'>`` (the stray quote is torch's).
_NOT_TENSOR = re.compile(
    r"^expected type of '(?P<src>.+?)' to be a tensor type, '? ?but found (?:<class '(?P<type>.+?)'>)?"
)
# A guarded function became a non-function: ``CodeGuardAccessor: Not a function on G['f'].__code__``.
_NOT_FUNCTION = re.compile(r"^CodeGuardAccessor: Not a function on (?P<src>.+?)(?:\.__code__)?$")
# Functions are guarded by their code object: ``___check_obj_id(G['act'].__code__, 1234)`` is ``G['act']``.
_OBJ_ID = re.compile(r"___check_obj_id\((?P<src>.+?)(?:\.__code__)?, \d+\)")
# Two arguments that were (or were not) the same object: ``a is b``; ``Duplicate tensors found: ["a", "b"]``.
_ALIAS = re.compile(r"^(?P<src>[\w.\[\]'\"]+) is [\w.\[\]'\"]+$")
_DUPLICATE = re.compile(r"""^Duplicate tensors found: \[["'](?P<src>[^"']+)["']""")
_LIMIT_TYPE = re.compile(r"Limit type: (\w+)")
_LIMIT = "recompile limit exceeded"
# torch < 2.13: ``RecompileLimitExceeded("<limit type> reached")``.
_LIMIT_REACHED = re.compile(r"\b((?:accumulated_)?(?:recompile|cache_size)_limit) reached\b")
# The guard's comment: ``  # <source line>  # <path tail>:<line> in <fn>`` (the last ``  # ``).
# torch 2.13 adds the frame of its own that installed the guard where that is not the user's:
# ``# prog.py:15 in drop_path (_dynamo/utils.py:4243 in run_node)``.
_COMMENT_PLACE = re.compile(
    r"  # (?P<file>[^#\n]+?):(?P<line>\d+) in (?P<fn>[\w<>.]+)(?: \([^()\n]+:\d+ in \w+\))?(?: \(HINT: .*)?\s*$"
)
# Guards on a value (``c == 0.5``): the kinds ``_parse_value_guard`` gives.
VALUE_KINDS = {
    "scalar_value",
    "optimizer_param_group",
    "global_value",
    "training_flag",
    "module_attribute",
    "value_branch",
}
# An attribute's None test (``self.scale is None  # if self.scale is None:  # model.py:22 in
# forward``, RF010's lazy default): its comment is the line that tested it, a first use. An
# argument's identity guard (``a is b``) names where the argument was bound instead.
_ATTRIBUTE_NONE_TEST = re.compile(r"^\w+(?:\.\w+)+ is None$")
_GUARD_SPLIT = re.compile(r"; (?=tensor '|GLOBAL_STATE|___|not |len\(|\d+ <=|[\w.\[\]'\"]+ == )")

_TENSOR_KINDS = {
    "size": "size_mismatch",
    "stride": "stride_mismatch",
    "dtype": "dtype_mismatch",
    "device": "device_mismatch",
    "rank": "rank_mismatch",
    "requires_grad": "requires_grad_mismatch",
    "dispatch key set": "dispatch_key_mismatch",
    "Tensor device index": "device_mismatch",
}


def parse_reasons(text: str) -> list[Reason]:
    """All guard failures in one torch failure string (usually one)."""
    text = strip_local_scope(text)
    entry = None
    match = _ENTRY.match(text)
    body = text
    if match:
        entry = match.group(1)
        body = text[match.end() :]
    body, _, stack_block = body.partition("\nUser stack trace:\n")
    head = body.split("\n", 1)[0]
    first_use = _first_use(stack_block)
    # Without the block (2.10), a value guard's comment still names the line that used the value.
    comment_use = _first_use_from_comment(head) if first_use is None else None
    guard = head.split("  # ", 1)[0].strip()
    parts = _GUARD_SPLIT.split(guard) if "; " in guard else [guard]
    reasons = []
    for part in parts:
        reason = _parse_guard(part.strip(), body)
        reason.entry = entry
        reason.text = text
        comment_names_use = reason.kind in VALUE_KINDS or (
            reason.kind == "id_mismatch" and bool(_ATTRIBUTE_NONE_TEST.match(part.strip()))
        )
        reason.first_use = first_use or (comment_use if comment_names_use else None)
        reasons.append(reason)
    return reasons


def parse_reason(text: str) -> Reason:
    return parse_reasons(text)[0]


def limit_hit_reason(fail_reason: str, entry: str | None = None) -> Reason:
    """The limit-hit Reason; ``source`` is the config torch named (``recompile_limit``,
    ``accumulated_recompile_limit``; ``cache_size_limit`` on 2.6)."""
    # 2.13 ends the message with ``Developer debug context: Limit type: <limit>``; older
    # releases say ``<limit> reached``.
    limit_type = _LIMIT_TYPE.search(fail_reason) or _LIMIT_REACHED.search(fail_reason)
    if limit_type:
        limit = limit_type.group(1)
    else:
        limit = "accumulated_recompile_limit" if "accumulated" in fail_reason else "recompile_limit"
    return Reason(kind="limit_hit", text=fail_reason.split("\n", 1)[0], entry=entry, source=limit)


def is_limit_hit(fail_reason: str | None) -> bool:
    if not fail_reason:
        return False
    return _LIMIT in fail_reason.lower() or bool(_LIMIT_REACHED.search(fail_reason))


def first_use_is_tail(location: Location) -> bool:
    """A first use read from the guard's comment (torch 2.10) names a path *tail*: the file's
    path past its common prefix with the directory above torch's, one character short when that
    prefix is ``/``. ``merge`` resolves it against the files of the Profile."""
    return not location.file.startswith(("/", "\\")) and ":" not in location.file[1:3]


def _first_use(stack_block: str) -> Location | None:
    frames = list(_USER_STACK.finditer(stack_block))
    if not frames:
        return None
    last = frames[-1]
    return Location(file=last.group("file"), line=int(last.group("line")), function=last.group("fn"))


def _first_use_from_comment(head: str) -> Location | None:
    if "  # " not in head:
        return None
    place = _COMMENT_PLACE.search(head)
    if place is None:
        return None
    return Location(file=place.group("file").strip(), line=int(place.group("line")), function=place.group("fn"))


def _literal(text: str):
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def _value_type(value) -> str:
    return "None" if value is None else type(value).__name__


def _parse_guard(guard: str, body: str) -> Reason:
    tensor = _TENSOR.match(guard)
    if tensor:
        return _parse_tensor_guard(tensor)

    not_tensor = _NOT_TENSOR.match(guard)
    if not_tensor:
        return Reason(
            kind="type_mismatch",
            text="",
            source=not_tensor.group("src"),
            expected="Tensor",
            actual=not_tensor.group("type"),
        )
    not_function = _NOT_FUNCTION.match(guard)
    if not_function:
        return Reason(kind="type_mismatch", text="", source=not_function.group("src"), expected="function")

    if guard.startswith("GLOBAL_STATE changed"):
        state = guard.split(":", 1)[1].strip() if ":" in guard else ""
        return Reason(kind="grad_mode" if "grad_mode" in state else "global_state", text="", source=state)

    if "0/1 specialization" in body:
        size = _SIZE_GUARD.search(guard)
        if size:
            return Reason(kind="size_specialization", text="", source=size.group("src"), dim=int(size.group("dim")))

    if guard.startswith(_DIM_MARKING):  # a mark is guarded (pytorch PR #176341)
        return Reason(kind="dim_marking_added", text="")

    offset = _OFFSET_GUARD.search(guard)
    if offset:  # `2 <= x.storage_offset()`: a view into a larger tensor, then a tensor of its own
        return Reason(kind="storage_offset", text="", source=offset.group("src"))

    stride = _STRIDE_GUARD.search(guard)
    if stride:
        return Reason(kind="stride_mismatch", text="", source=stride.group("src"), dim=int(stride.group("dim")))

    length = _LEN.match(guard)
    if length:
        return Reason(kind="container_length", text="", source=length.group("src"), value=int(length.group("value")))
    empty = _EMPTY.match(guard)
    if empty:
        return Reason(kind="container_length", text="", source=empty.group("src"), value=0)

    presence = _HASATTR.match(guard)
    if presence:
        obj, attr = presence.group("obj"), presence.group("attr")
        return Reason(kind="attribute_presence", text="", source=f"{obj}.{attr}")
    contains = _DICT_CONTAINS.search(guard)
    if contains:
        obj, key = contains.group("obj"), _literal(contains.group("key"))
        source = f"{obj}.{key}" if contains.group("instance") else f"{obj}[{key!r}]"
        return Reason(kind="attribute_presence", text="", source=source)
    missing = _MISSING.match(guard)
    if missing:
        return Reason(kind="attribute_presence", text="", source=missing.group("src"))

    type_id = _TYPE_ID.search(guard)
    if type_id:
        return Reason(kind="type_mismatch", text="", source=type_id.group("src"), expected=type_id.group("type"))
    obj_id = _OBJ_ID.search(guard)
    if obj_id:
        return Reason(kind="id_mismatch", text="", source=obj_id.group("src"))
    alias = _ALIAS.match(guard) or _DUPLICATE.match(guard)
    if alias:
        return Reason(kind="id_mismatch", text="", source=alias.group("src"))

    size = _SIZE_GUARD.search(guard)
    if size:  # a symbolic shape guard such as ``x.size()[0] == 16``
        return Reason(kind="size_mismatch", text="", source=size.group("src"), dim=int(size.group("dim")))

    compare = _parse_comparison(guard)
    if compare is not None:
        return compare
    equals = _EQUALS.match(guard)
    if equals:
        return _parse_value_guard(equals.group("src").strip(), _literal(equals.group("value")))
    return Reason(kind="other", text="")


def _parse_tensor_guard(tensor: re.Match[str]) -> Reason:
    """``tensor 'x' size mismatch at index 0. expected 3, actual 4`` and its kin."""
    kind = _TENSOR_KINDS.get(tensor.group("what").strip(), "other")
    reason = Reason(kind=kind, text="", source=tensor.group("src"))
    rest = tensor.group("rest")
    at_index = _AT_INDEX.search(rest)
    device_index = _DEVICE_INDEX.search(rest)
    requires_grad = _REQUIRES_GRAD.search(rest)
    if device_index:
        reason.expected = _literal(device_index.group(1))
        reason.actual = _literal(device_index.group(2))
    elif requires_grad:
        reason.expected = requires_grad.group(1) == "1"
        reason.actual = not reason.expected
    elif at_index:
        reason.dim = int(at_index.group(1))
        reason.expected = _literal(at_index.group(2))
        reason.actual = _literal(at_index.group(3))
    else:
        expected = _EXPECTED_ACTUAL.search(rest)
        if expected:
            reason.expected = _literal(expected.group(1))
            if expected.group(2) is not None:
                reason.actual = _literal(expected.group(2))
    if kind == "dispatch_key_mismatch":
        expected_key, actual_key = (_BACKEND_KEY.match(str(v)) for v in (reason.expected, reason.actual))
        if expected_key and actual_key and expected_key.group(1) != actual_key.group(1):
            reason.kind = "device_mismatch"
            reason.expected, reason.actual = expected_key.group(1).lower(), actual_key.group(1).lower()
    return reason


def _parse_value_guard(source: str, value) -> Reason:
    chain = source_of_expression(source)
    if chain is not None:  # arithmetic on one value (``(1.0 + ((-1)*self.p)) == 0.95``): that value's guard
        reason = _parse_value_guard(chain, None)
        reason.expression, reason.value_type = source, _value_type(value)
        return reason
    reason = Reason(kind="scalar_value", text="", source=source, value=value, value_type=_value_type(value))
    if _OPTIMIZER.search(source):
        reason.kind = "optimizer_param_group"
    elif _GLOBAL.match(source):
        reason.kind = "global_value"
    elif source.endswith(".training"):
        reason.kind = "training_flag"
    elif _ATTRIBUTE.match(source):
        reason.kind = "module_attribute"
    return reason


def _parse_comparison(guard: str) -> Reason | None:
    """``self.current_epoch <= 0``: which side of a branch on a value traced as a symbol."""
    compare = _COMPARE.match(guard)
    src = compare.group("src").strip() if compare else ""
    chain = source_of_expression(src) or (src if parse_source(src) else None)
    if compare is None or chain is None:
        return None
    value = _literal(compare.group("value"))
    return Reason(
        kind="value_branch", text="", source=chain, value=value, value_type=_value_type(value), expression=guard.strip()
    )
