"""Every value guard a recompile's call fails, not only the first: torch names the first failing
guard of each cached graph (``self._modules['dec'].n == 3``), and a second number that changed
with it (``self._modules['enc'].n``, a float beside an int) is left unsaid. At the start of a
recompile, each cached graph's guards of the form ``<source> == <number>`` are evaluated on the
new call, as torch's own ``get_guard_fail_reason`` evaluates a failing guard's code part, and
those whose value differs are recorded in torch's words (``L['self']._modules['enc'].n == 3``).
Bounded, and never raises: a guard that cannot be evaluated is skipped."""

from __future__ import annotations

import ast
import os
import re
import sys
import types

from recompile_fix.profile.sources import strip_local_scope  # standard library only

__all__ = ["FAILED_VALUES", "failed_value_guards", "guarded_holders"]

FAILED_VALUES = "__failed_values__"  # inputs[FAILED_VALUES]: the guards, as "<entry id>: <code part>"
_MAX_ENTRIES = 16  # cached graphs looked at (the recompile limit is 8)
# Code parts looked at per graph: a tiny Llama's run to tens of thousands (a guard per parameter),
# with a swapped-in module's float among the last; a part that is no `==` is passed over at once.
_MAX_PARTS = 1 << 17
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
            match = _VALUE_GUARD.match(part) if " == " in part else None
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


def guarded_holders(failed: list[str], f_locals: dict, f_globals: dict, module_type: type) -> dict[str, dict]:
    """The class of each nn.Module whose attribute a failing value guard reads
    (``L['args'][0]._modules['model']._modules['q_proj'].scaling == 2.0``: the module holding
    ``scaling``), keyed as the Profile spells sources (``args[0]._modules['model']._modules['q_proj']``),
    described as the inputs describe a module. A user's module swapped into a library model
    (a hand-written LoRA layer) is found by what ran, not by what the library's ``__init__`` builds."""
    holders: dict[str, dict] = {}
    scope = {"L": f_locals, "G": f_globals}
    for text in failed:
        match = _VALUE_GUARD.match(text.split(": ", 1)[-1])
        if match is None or "." not in match.group("src"):
            continue
        holder_source = match.group("src").rsplit(".", 1)[0]
        holder = _evaluate(holder_source, scope)
        if not isinstance(holder, module_type):
            continue
        cls = type(holder)
        entry = {"type": "Module", "class": cls.__name__, "qualname": cls.__qualname__}
        defined_in = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if isinstance(defined_in, str):
            entry["file"] = os.path.abspath(defined_in)
        holders[strip_local_scope(holder_source)] = entry
    return holders
