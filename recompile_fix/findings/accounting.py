"""Every recompile in a Profile, accounted for: each ends in exactly one of

* **fix**: a Finding with a fix covers it (safe, or unsafe with `--unsafe-fixes`): a *proposed*
  fix, as the summary says: only a run shows what a fix removes (`fix` and `verify` measure it,
  and say what remains and why);
* **no fix**: a Finding covers it but makes no edit, and says why; or no rule has a fix for its
  reason (the reason is named);
* **expected**: it is a recompile that should stay: a switch of grad mode (train ->
  `torch.no_grad()` eval), of `.training` (train/eval), into `torch.inference_mode()` (each
  compiles once per state), or a frame compiled with `dynamic=False` on purpose for a bounded set
  of sizes.

``report`` and the end of ``apply`` print the counts; they add up to the Profile's recompiles
(compiles after a frame's first, recompile-limit hits not counted). Other surfaces (the `fix`
table, the language server) call ``account`` with the Findings they planned.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.profile.model import REASON_KINDS, Compile, Frame, Profile, Reason
from recompile_fix.profile.sources import guard_words, shown_source

__all__ = [
    "EXPECTED",
    "FIX",
    "NO_FIX",
    "Accounting",
    "Outcome",
    "account",
    "covers_reason",
    "expected_why",
    "infer_covers",
    "serving_entries",
    "static_size_change",
]

FIX = "fix"
NO_FIX = "no fix"
EXPECTED = "expected"

# ``top_k is None`` / ``is not None`` (an optional argument that was None, or was not).
_NONE_TEST = re.compile(r" is (?:not )?None\b")
_SIZE_KINDS = ("size_mismatch", "size_specialization", "stride_mismatch", "rank_mismatch")


def _label(frame: Frame) -> str:
    return frame.label


@dataclass(frozen=True)
class Outcome:
    """One recompile and where it ends."""

    frame: Frame
    compile: Compile
    reason: Reason | None  # the guard failure it is accounted by
    category: str  # FIX / NO_FIX / EXPECTED
    why: str  # the Finding's line, or why it is expected, or which reason no rule fixes
    finding: Finding | None = None


@dataclass
class Accounting:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    def count(self, category: str) -> int:
        return sum(1 for o in self.outcomes if o.category == category)

    @property
    def unsafe(self) -> int:
        """The recompiles whose proposed fix is an unsafe one (`--unsafe-fixes`, or `fix`'s run)."""
        return sum(1 for o in self.outcomes if o.category == FIX and o.finding and o.finding.safety is Safety.UNSAFE)

    def summary(self) -> str:
        """``19 recompiles: 10 with a proposed fix, 8 with no fix (why given), 1 expected``, and how
        many of the fixes are unsafe ones (every surface counts them alike: `report`, `apply`)."""
        noun = "recompile" if self.total == 1 else "recompiles"
        unsafe = f"; {self.unsafe} of the fixes only with --unsafe-fixes" if self.unsafe else ""
        return (
            f"{self.total} {noun}: {self.count(FIX)} with a proposed fix, {self.count(NO_FIX)} with no fix (why given), "
            f"{self.count(EXPECTED)} expected{unsafe}"
        )

    def unexplained(self, label: Callable[[Frame], str] = _label) -> list[tuple[str, int]]:
        """(line, count) for the outcomes no Finding speaks for: the expected ones and the
        reasons no rule has a fix for, grouped, most frequent first. ``label`` names a frame
        (report's: torch's files by import path)."""
        counts: Counter[str] = Counter()
        for outcome in self.outcomes:
            if outcome.finding is None:
                kind = "expected" if outcome.category == EXPECTED else "no fix"
                counts[f"[{kind}] {label(outcome.frame)}: {outcome.why}"] += 1
        return counts.most_common()

    def to_json(self, label: Callable[[Frame], str] = _label) -> dict[str, Any]:
        return {
            "recompiles": self.total,
            "fix": self.count(FIX),
            "no_fix": self.count(NO_FIX),
            "expected": self.count(EXPECTED),
            "items": [
                {
                    "frame": label(o.frame),
                    "compile": o.compile.id,
                    "category": o.category,
                    "why": o.why,
                    **({"rule": o.finding.rule} if o.finding is not None else {}),
                }
                for o in self.outcomes
            ],
        }


def account(
    profile: Profile,
    findings: Iterable[Finding],
    *,
    unsafe_fixes: bool = True,
    deliberate_static: Callable[[Frame], str | None] | None = None,
) -> Accounting:
    """Where each recompile of ``profile`` ends, given the Findings planned for it. An unsafe fix
    counts as a fix (it is one, with `--unsafe-fixes`) unless ``unsafe_fixes`` is False.
    ``deliberate_static(frame)`` says where a frame is compiled with ``dynamic=False`` (e.g.
    "`dynamic=False` at train.py:12"), or None: its size recompiles are then expected."""
    # Only a Finding that covers a frame can fix its recompiles: indexed by frame, in order (each
    # recompile scanning every Finding was quadratic: 15,000 frames, minutes).
    by_frame: dict[str, list[Finding]] = {}
    for finding in findings:
        for label in dict.fromkeys(entry.get("frame") for entry in finding.covers):
            if isinstance(label, str):
                by_frame.setdefault(label, []).append(finding)
    result = Accounting()
    for frame in profile.frames:
        for compile_ in frame.compiles:
            if not compile_.is_recompile or compile_.limit_hit:
                continue
            result.outcomes.append(
                _outcome(
                    frame,
                    compile_,
                    by_frame.get(frame.label, []),
                    unsafe_fixes=unsafe_fixes,
                    deliberate_static=deliberate_static,
                )
            )
    return result


def _outcome(
    frame: Frame,
    compile_: Compile,
    findings: list[Finding],
    *,
    unsafe_fixes: bool,
    deliberate_static: Callable[[Frame], str | None] | None,
) -> Outcome:
    """A recompile happens because no cache entry of the frame served the call, each for the
    guard it failed (torch records one failure per entry). So it is

    * a fix when some entry failed only on guards a fix covers: with the fix, that entry serves;
    * expected when every entry is for another state (grad mode, train/eval, None or not...):
      no entry could serve, a new graph is due;
    * no fix otherwise: an entry of the same state failed on a guard no fix covers (the
      Finding's reason, or the reason no rule has one)."""
    groups: dict[str | None, list[Reason]] = {}
    for reason in compile_.reasons:
        groups.setdefault(reason.entry, []).append(reason)
    entries = list(groups.values())  # the newest entry's failure first, as torch lists them

    def fixing(reason: Reason) -> Finding | None:
        usable = [
            f
            for f in findings
            if _covers(f, frame, reason) and (f.safety is Safety.SAFE or (f.safety is Safety.UNSAFE and unsafe_fixes))
        ]
        # A safe fix first, then one `apply` makes (a fallback is tried only where another is not kept).
        return min(usable, key=lambda f: (f.safety is not Safety.SAFE, f.fallback), default=None)

    # torch records the first guard an entry failed; a module's int that the run recorded with
    # another value than the entry's would fail too, after a fix of the first.
    hidden = {id(failures): _hidden_failures(frame, compile_, failures) for failures in entries}
    for failures in entries:
        fixes = [fixing(r) for r in failures + hidden[id(failures)]]
        if all(fixes):
            # Where one of the fixes it needs is unsafe, so is the recompile's: counted as such.
            chosen = next((f for f in fixes if f is not None and f.safety is Safety.UNSAFE), fixes[0])
            assert chosen is not None
            return Outcome(frame, compile_, failures[0], FIX, chosen.describe(unsafe_fixes=unsafe_fixes), chosen)
    if not entries:
        return Outcome(frame, compile_, None, NO_FIX, "torch recorded no reason for this recompile")
    expected = [_expected(frame, failures, deliberate_static, compile_) for failures in entries]
    if all(expected):
        return Outcome(frame, compile_, entries[0][0], EXPECTED, expected[0] or "")
    for failures, why in zip(entries, expected):
        if why is not None:
            continue  # an entry for another state: it was never going to serve this call
        for reason in _unfixed(failures + hidden[id(failures)], fixing):
            covering = next((f for f in findings if _covers(f, frame, reason)), None)
            if covering is not None:
                return Outcome(frame, compile_, reason, NO_FIX, covering.describe(unsafe_fixes=unsafe_fixes), covering)
    failures = next(f for f, why in zip(entries, expected) if why is None)
    primary = _unfixed(failures + hidden[id(failures)], fixing)[0]
    phrase = REASON_KINDS.get(primary.kind, primary.kind)
    source = f" {shown_source(primary.source)}" if primary.source else ""
    if primary.source and primary.kind == "size_mismatch" and primary.dim is not None:
        source += f" dim {primary.dim}"
    if primary.kind == "other" and not primary.source and guard_words(primary.text):
        source = f": `{guard_words(primary.text)}`"
    return Outcome(frame, compile_, primary, NO_FIX, f"no rule has a fix for this reason ({phrase}{source})")


def serving_entries(frame: Frame, compile_: Compile) -> list[list[Reason]]:
    """The cache entries that would have served this recompile's call but for their guards, each
    as every guard it failed: torch's named one, then those the run shows would fail too
    (``_hidden_failures``). Entries for another state (grad mode, train/eval...) are left out."""
    groups: dict[str | None, list[Reason]] = {}
    for reason in compile_.reasons:
        groups.setdefault(reason.entry, []).append(reason)
    return [
        failures + _hidden_failures(frame, compile_, failures)
        for failures in groups.values()
        if _expected(frame, failures, None, compile_) is None
    ]


def _unfixed(reasons: list[Reason], fixing: Callable[[Reason], Finding | None]) -> list[Reason]:
    """The guards no fix covers: those the recompile stays for (all of them where each has one)."""
    return [r for r in reasons if fixing(r) is None] or reasons


def _hidden_failures(frame: Frame, compile_: Compile, failures: list[Reason]) -> list[Reason]:
    """The guards of the failed entry that torch did not name but the run shows would fail too:
    those the recorder found failing (``Compile.also_failed``), and an nn.Module int, float or bool attribute (``self.n``) recorded at this compile with another
    value than at the entry's, and guarded on its value: torch named it failing elsewhere in the
    frame (one made dynamic, by ``dynamic_sources`` say, never fails and is left out)."""
    entry_id = failures[0].entry if failures else None
    entry = next((c for c in frame.compiles if c.id == entry_id), None) if entry_id else None
    if entry is None:
        return []
    guarded = {r.source for r in frame.reasons()}
    named = {r.source for r in failures}
    # The recorder's own evaluation of the entry's value guards on this call (any source).
    hidden = [r for r in compile_.also_failed or () if r.entry == entry_id and r.source not in named]
    named |= {r.source for r in hidden}
    for source, now in compile_.inputs.items():
        then = entry.inputs.get(source)
        if not source.startswith("self.") or source in named or source not in guarded or not isinstance(then, dict):
            continue
        if now.get("type") not in _VALUE_GUARDED or now.get("type") != then.get("type") or "value" not in now:
            continue
        if now.get("value") != then.get("value"):
            hidden.append(
                Reason(
                    "training_flag" if source.endswith(".training") else "module_attribute",
                    f"{source} == {then.get('value')!r}  # not named by torch: recorded as {now.get('value')!r}",
                    entry=entry_id,
                    source=source,
                    value=then.get("value"),
                    value_type=now.get("type"),
                )
            )
    hidden.extend(_hidden_sizes(compile_, entry, named))
    return hidden


def _hidden_sizes(compile_: Compile, entry: Compile, named: set[str | None]) -> list[Reason]:
    """The size guards of ``entry`` that this call's tensors fail beside the named one
    (``static_size_change``; none where the entry's graph's dims were not recorded)."""
    if entry.dims is None:
        return []
    hidden = []
    for source in compile_.inputs:
        changed = None if source in named else static_size_change(entry, compile_, source)
        if changed is not None:
            was, now = entry.inputs[source]["shape"][changed], compile_.inputs[source]["shape"][changed]
            hidden.append(
                Reason(
                    "size_mismatch",
                    f"tensor '{source}' size mismatch at index {changed}. expected {was}, actual {now}"
                    "  # not named by torch",
                    entry=entry.id,
                    source=source,
                    dim=changed,
                    expected=was,
                    actual=now,
                )
            )
    return hidden


def static_size_change(entry: Compile, now: Compile, source: str) -> int | None:
    """The first dimension in which tensor ``source`` was given another size at ``now`` than at
    ``entry``, where ``entry``'s graph did not trace it as dynamic (so could not serve the new
    size); None where none, or where either compile did not record it as a tensor."""
    then, later = entry.inputs.get(source) or {}, now.inputs.get(source) or {}
    if then.get("type") != "Tensor" or later.get("type") != "Tensor":
        return None
    shape, was = later.get("shape"), then.get("shape")
    if not isinstance(shape, list) or not isinstance(was, list) or len(shape) != len(was):
        return None
    dynamic = {d.get("dim") for d in (entry.dims or {}).get(source, []) if d.get("state") == "dynamic"}
    return next((d for d, (x, y) in enumerate(zip(was, shape)) if x != y and d not in dynamic), None)


_VALUE_GUARDED = ("int", "float", "bool")


def _expected(
    frame: Frame,
    failures: list[Reason],
    deliberate_static: Callable[[Frame], str | None] | None,
    compile_: Compile | None = None,
) -> str | None:
    """Why an entry that failed on these guards is one for another state, or None."""
    for reason in failures:
        why = expected_why(reason)
        if why is None and compile_ is not None and _parameter_went_dynamic(reason, compile_):
            why = (
                f"`{reason.source}` changed shape and this compile traced it dynamic (parameter sizes "
                "are dynamic in this program): the first shape's graph is static, this one serves the rest"
            )
        if (
            why is None
            and reason.kind == "type_mismatch"
            and any(_is_none_switch(r) and r.source == reason.source for r in frame.reasons())
        ):  # int -> None -> int: the type guard of the None switch
            why = f"`{reason.source}` switched between None and a value: the two take different paths, one graph each"
        if why is None and _another_module_behind_torchs_wrapper(reason, frame):
            why = (
                f"`{reason.source}` has another shape: every module compiled as `torch.compile(module)` whose "
                "forward is torch's (an nn.Sequential) runs in torch's one `inner` frame, and another module "
                "of other shapes (a policy beside a value net) is a graph of its own, compiled once"
            )
        if why is None and reason.kind in _SIZE_KINDS and deliberate_static is not None and not frame.limit_hits:
            where = deliberate_static(frame)
            if where is not None:
                why = f"compiled with {where} on purpose: one graph per size, for a bounded set of sizes"
        if why is not None:
            return why
    return None


def _another_module_behind_torchs_wrapper(reason: Reason, frame: Frame) -> bool:
    """A parameter's size guard in torch's ``inner`` wrapper around a compiled module (``fn``):
    the frame's cache serves every module compiled so, one graph each (a trial's PPO: a policy
    and a value net, each `torch.compile`d: "no rule has a fix"). Not where the limit was hit:
    then many modules share it (RF001's parameter-shape and isolate fixes)."""
    source = reason.source or ""
    return (
        reason.kind == "size_mismatch"
        and source.startswith("fn.")
        and "_parameters[" in source
        and frame.name == "inner"
        and frame.file.replace("\\", "/").endswith("torch/_dynamo/external_utils.py")
        and not frame.limit_hits
    )


def _parameter_went_dynamic(reason: Reason, compile_: Compile) -> bool:
    """A parameter's size guard failed and the new graph traced that dim as a symbol: automatic
    dynamic, once ``force_parameter_static_shapes`` is off (RF001's fix for parameters of
    several shapes behind one frame)."""
    if reason.kind != "size_mismatch" or not reason.source or "_parameters[" not in reason.source:
        return False
    records = (compile_.dims or {}).get(reason.source, [])
    return any(r.get("dim") == reason.dim and r.get("state") == "dynamic" for r in records)


def expected_why(reason: Reason) -> str | None:
    """Why a recompile for this reason should stay, or None. Each of these compiles at most once
    per state, and the states are few (torch 2.13's texts, measured)."""
    if reason.kind == "grad_mode":
        return "grad mode switched (training with grad, then `torch.no_grad()`): one graph per grad mode"
    if reason.kind == "global_state" and (reason.source or "").startswith("autocast"):
        return f"`torch.autocast` switched (`{reason.source}`): one graph per autocast state"
    if reason.kind == "training_flag":
        return "`.training` flipped (train/eval): one graph per mode"
    if reason.kind == "value_branch":
        return (
            f"a branch on `{reason.source}` took its other side (the graph was for `{reason.expression}`): "
            "one graph per side"
        )
    if reason.kind == "requires_grad_mismatch":
        return (
            f"`{reason.source}` requires grad on some calls and not on others (data beside an activation, "
            "real samples beside generated ones, or what a frozen part returns before and after it is "
            "unfrozen): autograd needs a graph for each"
        )
    if (
        reason.kind == "dispatch_key_mismatch"
        and "Autograd" in str(reason.expected)
        and "Autograd" not in str(reason.actual)
    ):
        return "entered `torch.inference_mode()`: inference tensors get a graph of their own"
    if _is_none_switch(reason):
        return f"`{reason.source}` switched between None and a value: the two take different paths, one graph each"
    if reason.value is False and _INITIALIZED.search(reason.source or ""):
        return (
            f"`{reason.source}` was False (an empty cache before its first call, prefill) and is now True "
            "(decode): each state takes its own path, compiled once"
        )
    if reason.kind == "scalar_value" and reason.value_type in ("bool", "str"):
        what = "a flag" if reason.value_type == "bool" else "a mode string"
        return f"`{reason.source}` is {what} that picks the code's path: one graph per value, compiled once each"
    if _OPTIMIZER_STATE.search(reason.text.split("\n", 1)[0]):
        return "the optimizer's state was created by its first step: the next steps take another path, compiled once"
    return None


# A cache's "filled yet" flag (transformers' DynamicCache layers: `is_initialized`), guarded at
# the first call (empty) and every call after (filled): two states, each compiled once.
_INITIALIZED = re.compile(r"(?:^|\.)_?(?:is_)?initiali[sz]ed$")
# A compiled optimizer step's guard on its state (`len(self.state[p]) != 0`): empty before the
# first step, filled after (measured, torch 2.13: SGD with momentum, Adam).
_OPTIMIZER_STATE = re.compile(r"len\((?:self|L\['self'\])\.state\[.*\]\)\s*[!=]=\s*0")


def _is_none_switch(reason: Reason) -> bool:
    """An argument (not an attribute: see RF010's lazy defaults) that was None and then not,
    or the other way: ``top_k is None``."""
    return (
        reason.kind == "id_mismatch"
        and bool(reason.source and reason.source.isidentifier())
        and bool(_NONE_TEST.search(reason.text.split("\n", 1)[0].split("  # ", 1)[0]))
    )


def _covers(finding: Finding, frame: Frame, reason: Reason) -> bool:
    return covers_reason(finding, frame.label, reason) > 0


def covers_reason(finding: Finding, frame_label: str, reason: Reason) -> int:
    """How closely ``finding`` covers this reason of the frame: 2 when it names the guarded
    source, 1 when it covers every reason of the kind there, 0 when not at all."""
    best = 0
    for entry in finding.covers:
        if entry.get("frame") != frame_label:
            continue
        if entry.get("sources") and reason.source not in entry["sources"]:
            continue
        if entry.get("kinds") and reason.kind not in entry["kinds"]:
            continue
        dims = (entry.get("dims") or {}).get(reason.source)
        if dims is not None and reason.kind == "size_mismatch" and reason.dim is not None and reason.dim not in dims:
            continue  # another dim of the tensor: the fix marks these only
        best = max(best, 2 if entry.get("sources") else 1)
    return best


def infer_covers(finding: Finding, consumes: tuple[str, ...], profile: Profile) -> list[dict[str, Any]]:
    """What a Finding covers when its rule does not say: the reasons of the kinds its rule
    consumes, in the frames its evidence names."""
    evidence = finding.evidence
    labels = [evidence.get("frame")] + list(evidence.get("frames", [])) + list(evidence.get("also_frames", []))
    labels = [label for label in labels if isinstance(label, str)]
    return [{"frame": f.label, "kinds": sorted(consumes)} for f in profile.frames if f.label in labels and consumes]
