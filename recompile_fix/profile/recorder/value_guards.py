"""Every value guard a recompile's call fails, not only the first: torch names the first failing
guard of each cached graph (``self._modules['dec'].n == 3``), and a second number that changed
with it (``self._modules['enc'].n``, a float beside an int) is left unsaid. At the start of a
recompile, each cached graph's guards of the form ``<source> == <number>`` are evaluated on the
new call, as torch's own ``get_guard_fail_reason`` evaluates a failing guard's code part, and
those whose value differs are recorded in torch's words (``L['self']._modules['enc'].n == 3``).
Bounded, and never raises: a guard that cannot be evaluated is skipped."""

from __future__ import annotations

import ast
import re
import types

__all__ = ["FAILED_VALUES", "failed_value_guards"]

FAILED_VALUES = "__failed_values__"  # inputs[FAILED_VALUES]: the guards, as "<entry id>: <code part>"
_MAX_ENTRIES = 16  # cached graphs looked at (the recompile limit is 8)
_MAX_PARTS = 4096  # code parts looked at per graph
_MAX_FAILED = 32  # failing guards recorded per compile
# ``L['self']._modules['enc'].n == 3``, ``G['STEP'] == 4``, ``L['alpha'] == 0.25``: a source
# made of names, attributes and constant subscripts, compared with a number.
_VALUE_GUARD = re.compile(
    r"""^(?P<src>[LG]\[['"][\w.]+['"]\](?:\.\w+|\[(?:'[^'\]]*'|"[^"\]]*"|-?\d+)\])*) == (?P<value>-?[\d.]+(?:e[-+]?\d+)?)$"""
)


def failed_value_guards(code: types.CodeType, f_locals: dict, f_globals: dict) -> list[str] | None:
    """The failing value guards of the graphs cached for ``code`` (an empty list: none failed);
    None where nothing was cached (a first compile) or torch keeps no guard text to read."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:  # a torch without it: nothing recorded, the rules read torch's reasons
        return None
    failed: list[str] = []
    try:
        entries = list(_debug_get_cache_entry_list(code))[:_MAX_ENTRIES]
    except Exception:
        return None
    if not entries or not any(getattr(getattr(e, "guard_manager", None), "code_parts", None) for e in entries):
        return None
    for entry in entries:
        manager = getattr(entry, "guard_manager", None)
        parts = getattr(manager, "code_parts", None) or []
        scope_globals = (getattr(manager, "global_scope", None) or {}).get("G", f_globals)
        scope = {"L": f_locals, "G": scope_globals}
        entry_id = str(getattr(entry, "compile_id", "") or "")
        for part in list(parts)[:_MAX_PARTS]:
            if len(failed) >= _MAX_FAILED:
                return failed
            match = _VALUE_GUARD.match(part)
            if match is None:
                continue
            current = _evaluate(match.group("src"), scope)
            expected = ast.literal_eval(match.group("value"))
            # Per graph: two graphs with one guard (`L['top_k'] == 20`) each fail on it, and a
            # graph whose failure torch named elsewhere (`temperature`) fails on it unsaid.
            found = f"{entry_id}: {part}" if entry_id else part
            if type(current) in (int, float) and current != expected and found not in failed:
                failed.append(found)
    return failed


def _evaluate(source: str, scope: dict) -> object:
    try:
        return eval(compile(source, "<guard>", "eval"), {"__builtins__": {}}, scope)  # noqa: S307 torch's guard text
    except Exception:
        return None
