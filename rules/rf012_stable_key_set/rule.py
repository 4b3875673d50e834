"""RF012 stable-key-set: a dict of keyword arguments that gains and loses a key between calls
recompiles its compiled frame; passing every key, None where it has no value, keeps one key set."""

from __future__ import annotations

from typing import Any

import libcst as cst

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.call_site_code import node_at_span
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Compile, Frame, Location, Profile, Reason, is_library_path
from recompile_fix.rules.rf012_stable_key_set.key_uses import key_of, read_only_by_get

__all__ = ["RULE", "StableKeySet"]


class StableKeySet(Rule):
    """
    ## What it does
    Where a call hands compiled code a `**kwargs` dict whose key set changes between calls (a
    key added on some calls, popped on others), and the key, where present, carried `None`,
    passes every such key at the call, `None` first and the dict's own values over it:
    `compiled(x, **{"padding": None, **extra})`.

    ## Why is this bad?
    Dynamo guards a dict's keys (`not ___dict_contains('padding', kwargs)`): a key that comes and
    goes compiles the frame again, even where the code reads it with `kwargs.get("padding")`,
    which gives `None` either way. A wrapper that `update()`s some keys when it needs them and
    `pop()`s them when it does not (xDiT's Minimax-H3 attention kwargs, fixed by hand the same
    way) recompiles on every flip. With the keys always there, `None` where absent, the key set
    is one; measured (torch 2.13): a key popped and added back as `None` on alternate steps,
    2 compiles -> 1, the same outputs.

    ## Example
    ```python
    extra = {"cond": cond}
    for step in range(steps):
        if needs_padding(step):
            extra.update(padding=None)
        else:
            extra.pop("padding", None)
        out = compiled(x, **extra)
    ```
    Use instead:
    ```python
        out = compiled(x, **{"padding": None, **extra})
    ```

    ## Fix safety
    Only keys the run saw come and go, and only where every compile that had one saw it carry
    `None`, and the recorded compiles differ in nothing else: a key that carried a tensor on
    some calls is another graph whatever the key set (no edit). The fix is safe where the
    compiled function is the user's own, readable code and reads each such key only as
    `kwargs.get("key")` (or `.get("key", None)`): absent and `None` read the same. Anything else
    (the dict passed on as `**kwargs`, `"key" in kwargs`, `len(kwargs)`, iterating it, a
    `.get` default other than `None`, library code) could tell them apart: unsafe, unproven, and
    `fix` keeps it only where a run shows fewer compiles and the same outputs. The call must
    pass the dict as one `**` argument; the fix builds a new dict there, which `**` did anyway.

    ## Profile evidence
    `not ___dict_contains('padding', kwargs)` and `___dict_contains('padding', kwargs)` (an
    "attribute added or removed" guard on `kwargs['padding']`), `len(kwargs) == 1` where the code
    reads the dict's length first (passing it on with `**kwargs`), `not kwargs` where the dict was
    empty; and the type each key's value had at each compile (the recorded inputs: `NoneType`
    where present, absent where not), which also name the keys that came and went with the one
    the guard names.
    """

    id = "RF012"
    name = "stable-key-set"
    message = (
        "`{param}` of compiled `{frame}` gains and loses keys between calls: pass every key, None where it has none"
    )
    consumes = ("attribute_presence", "container_length")
    triggers = ("**",)
    examples = (
        Example(
            before="    outputs.append(compiled(x, **extra))\n",
            after='    outputs.append(compiled(x, **{"max_seqlen": None, "padding": None, **extra}))\n',
            golden="RF012/stable_key_set",
        ),
        Example(before="    outputs.append(compiled(x, **extra))\n", after=None, golden="RF012/key_with_a_tensor"),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings = []
        for frame in profile.frames:
            keys = _changing_keys(frame)
            if not keys:
                continue
            for site, compiles in frame.call_sites():
                if site is not None and compiles:
                    finding = self._at_call(frame, site, compiles, keys, project)
                    if finding is not None:
                        findings.append(finding)
        return findings

    def _at_call(
        self,
        frame: Frame,
        site: Location,
        compiles: list[Compile],
        keys: dict[str, dict[str, list[Reason]]],
        project: Project,
    ) -> Finding | None:
        source = project.source(site.file)
        call = call_at_site(source, site, frame, project.source) if source is not None else None
        stars = [a for a in call.args if a.star == "**"] if call is not None else []
        guards = [r for by_key in keys.values() for found in by_key.values() for r in found]
        # Only where every compile here differs from the others in these keys alone, and each
        # key carried None wherever it was there: then absent and None are one graph.
        param, by_key = next(iter(keys.items()))
        if len(keys) != 1:
            return None
        changing = set(by_key) - {""}
        merges, valued = _merges(compiles, param, changing)
        if not changing:
            return None
        names = ", ".join(f"`{k}`" for k in sorted(changing))
        why = None
        if valued:
            why = (
                f"{', '.join(f'`{k}`' for k in valued)} carried a value when present: absent and present "
                "are different graphs whatever the key set (one compile per combination is the floor)"
            )
        elif not merges:
            return None
        elif source is None or call is None or len(stars) != 1:
            why = "no call passing one `**` dict found at the call site: pass every key there, None where it has none"
        if why is not None or source is None or call is None:
            return Finding(
                rule=self.id,
                file=site.file,
                location=site,
                safety=Safety.NONE,
                message=f"`{param}` of compiled `{frame.shown_name}` gains and loses {names} between calls "
                f"({len(frame.compiles)} compiles)",
                evidence=frame_evidence(frame, guards, call_site=f"{site.file}:{site.line}"),
                notes=[why or ""],
            )
        star = stars[0]
        pos = source.positions[star.value]
        safety, notes = Safety.SAFE, []
        func_source = None if is_library_path(frame.file) else project.source(frame.file)
        func = func_source.function_def(frame.first_line, frame.name) if func_source is not None else None
        why_not = (
            read_only_by_get(func_source, func, param, changing)
            if func is not None and func_source is not None
            else "the compiled code is not readable"
        )
        if why_not is not None:
            safety = Safety.UNSAFE
            notes.append(
                f"unproven: {why_not}, which could tell an absent key from one that is None; `fix` keeps "
                "it only where a run shows fewer compiles and the same outputs"
            )
        finding = Finding(
            rule=self.id,
            file=site.file,
            location=source.location_of(call, site.file, site.function),
            safety=safety,
            message=f"`{param}` of compiled `{frame.shown_name}` gains and loses {names} between calls "
            f"({len(frame.compiles)} compiles): pass every key, None where it has none",
            evidence=frame_evidence(frame, guards, call_site=f"{site.file}:{site.line}"),
            notes=notes,
        )
        if safety is Safety.UNSAFE:
            finding.unsafe_because = UNPROVEN
        finding.params = {
            "star": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
            "keys": sorted(changing),
        }
        finding.covers = _covers(frame, param, changing)
        return finding

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        value = node_at_span(source, cst.BaseExpression, finding.params["star"])
        start, end = source.span(value)
        defaults = ", ".join(f'"{k}": None' for k in finding.params["keys"])
        return [Edit(finding.file, start, end, f"{{{defaults}, **{source.code(value)}}}", self.id)]

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """A ``**{...}`` that lists every key already (the fix, or a hand-written one)."""
        try:
            value = node_at_span(source, cst.BaseExpression, finding.params["star"])
        except StopIteration:
            return None
        if isinstance(value, cst.Dict):
            present = {
                e.key.evaluated_value
                for e in value.elements
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
            }
            if set(finding.params["keys"]) <= present:
                return f"line {finding.location.line}: every key is passed"
        return super().already_present(finding, source)


def _changing_keys(frame: Frame) -> dict[str, dict[str, list[Reason]]]:
    """{dict parameter: {key: its guards}} from the frame's guard failures: a key's presence
    (``___dict_contains('padding', kwargs)``), or the dict's length (``len(kwargs) == 1``) or
    truth (``not kwargs``, an empty dict), filed under the key "" (the inputs name the keys)."""
    found: dict[str, dict[str, list[Reason]]] = {}
    for reason in frame.reasons():
        about = _dict_guard(reason)
        if about is not None:
            found.setdefault(about[0], {}).setdefault(about[1], []).append(reason)
    return found


def _covers(frame: Frame, param: str, keys: set[str]) -> list[dict[str, Any]]:
    """The guards the fix makes pass: each key's presence, and the dict's length (or truth:
    ``not kwargs``, parsed as its length)."""
    return [
        cover(frame, [f"{param}[{k!r}]" for k in keys], ["attribute_presence"]),
        cover(frame, [param], ["container_length"]),
    ]


def _dict_guard(reason: Reason) -> tuple[str, str] | None:
    """(dict parameter, key or "") where ``reason`` is a guard on a dict's key set."""
    if reason.kind == "attribute_presence" and reason.source:
        return key_of(reason.source)
    if reason.kind == "container_length" and reason.source and reason.source.isidentifier():
        return reason.source, ""
    return None


def _merges(compiles: list[Compile], param: str, keys: set[str]) -> tuple[bool, list[str]]:
    """(merges, valued): do these compiles differ in the keys' presence alone, each present key
    carrying None, so that with every key passed as None they are fewer graphs (every compile
    failed only presence guards of these keys, its inputs recorded)? ``valued``: the keys that
    carried a value where present, which no key set merges. Adds to ``keys`` the others the
    inputs show coming and going."""
    if len(compiles) < 2 or any(not c.inputs for c in compiles):
        return False, []
    for compile_ in compiles:
        for reason in compile_.reasons:
            about = _dict_guard(reason)
            if about is None or about[0] != param or (about[1] and about[1] not in keys):
                return False, []
    # Torch names the first key whose guard failed; the inputs show the others that came and
    # went with it (the whole set an `update()` adds).
    seen = [{k[1] for k in map(key_of, c.inputs) if k is not None and k[0] == param} for c in compiles]
    everywhere = seen[0].intersection(*seen[1:])
    keys |= seen[0].union(*seen[1:]) - everywhere
    classes: set[tuple[Any, ...]] = set()
    valued: set[str] = set()
    for compile_ in compiles:
        row = []
        for source, entry in sorted(compile_.inputs.items()):
            split = key_of(source)
            if split is not None and split[0] == param and split[1] in keys:
                if entry.get("type") not in ("None", "NoneType"):
                    valued.add(split[1])
                continue
            row.append((source, entry.get("type"), str(entry.get("shape"))))
        classes.add(tuple(row))
    if valued:
        return False, sorted(valued)
    return len(classes) < len(compiles), []


RULE = StableKeySet()
