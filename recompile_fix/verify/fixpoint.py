"""`recompile-fix fix`: profile, plan, verify and keep, round after round, to a fixed point.

    run 1: the program as it is, in the user's tree (the first Profile)
    round r: plan the fixes not tried yet on a working copy of the project, with the Profile of
             its current state (``prove.plan_result``: the one pipeline, fixes already in the
             code recognised by their rules); run them in fresh copies (``prove.select_verified``:
             all together, else one at a time); write what verified into the working copy. The
             run of the kept fixes is the next round's Profile.
    until a round has nothing new to try, nothing verifies, or N rounds were run.

Then the user's files become the working copy's (``pipeline.fix.write_rewrites``), or the diff
is printed. The closing table compares the first run with the last, per frame and call site, and
gives every recompile that remains its typed reason and why it stays (``why_it_stays``).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recompile_fix.edits.rewrite import FileRewrite
from recompile_fix.errors import UserError
from recompile_fix.findings.accounting import covers_reason, expected_why
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.notebook import source_bytes
from recompile_fix.pipeline.fix import ApplyResult, is_selected, select_fixes, write_rewrites
from recompile_fix.profile import scratch as scratch_dirs
from recompile_fix.profile.compiled_outputs import DEFAULT_CALLS
from recompile_fix.profile.model import REASON_KINDS, Compile, Frame, Profile, Reason, resolve, sha256_bytes
from recompile_fix.profile.resume import without_line
from recompile_fix.progress import Progress
from recompile_fix.verify.compare import Tolerance, Verification, allowances, compare_runs, match_frames
from recompile_fix.verify.judge import NO_OP, covered
from recompile_fix.verify.prove import Trials, apply_fixes, compile_totals, fewer_compiles, plan_result
from recompile_fix.verify.runs import Run, check_before
from recompile_fix.verify.tree import Checkout

__all__ = ["FixPoint", "Remaining", "Round", "SiteRow", "fix_to_fixed_point", "why_it_stays"]

DEFAULT_ROUNDS = 3


@dataclass
class Round:
    number: int
    tried: list[Finding]
    kept: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, list[str]]] = field(default_factory=list)  # (fix, what went wrong)
    verification: Verification | None = None  # the round's start against its kept fixes


@dataclass
class SiteRow:
    """One call site of a compiled frame: its compiles in the first run and in the last."""

    frame: str
    site: str  # file:line as in the last run (the first run's where it is gone), and its code
    before: int
    after: int


@dataclass
class Remaining:
    """A recompile of the last run: its typed reasons and why it stays."""

    frame: str
    site: str
    compile_id: str
    reasons: str
    why: str


@dataclass
class FixPoint:
    command: list[str]
    first: Run
    last: Run
    rounds: list[Round] = field(default_factory=list)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    converged: bool = False  # False: N rounds ran and fixes were still left to try
    runs: int = 0
    verification: Verification | None = None  # the first run against the last (None: nothing kept)
    sites: list[SiteRow] = field(default_factory=list)
    remaining: list[Remaining] = field(default_factory=list)
    profile: Profile | None = None  # the last run's, as the user's fixed tree has it
    pending: list[Finding] = field(default_factory=list)  # fixes selected but never tried (rounds ran out)
    # Trade-off fixes safe mode does not try (a graph break, regional compile...), each with the
    # recompiles of the last run it is about: what it would give, for --unsafe-fixes.
    not_tried: list[tuple[Finding, int]] = field(default_factory=list)
    unsafe_fixes: bool = False  # run with --unsafe-fixes: an unproven fix's rounding was allowed

    @property
    def kept(self) -> list[Finding]:
        return [f for r in self.rounds for f in r.kept]

    @property
    def dropped(self) -> list[tuple[Finding, list[str]]]:
        return [d for r in self.rounds for d in r.dropped]


def fix_to_fixed_point(
    command: list[str],
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    backend: str | None = None,
    unsafe_fixes: bool = False,
    rounds: int = DEFAULT_ROUNDS,
    tolerance: Tolerance | None = None,
    calls: int = DEFAULT_CALLS,
    write: bool = True,
    apply_options: dict | None = None,
    progress: Progress | None = None,
) -> FixPoint:
    """Fix ``command``'s program (run from ``root``, default here) to a fixed point; write the
    user's files unless ``write`` is false. Raises UserError when the program fails as it is."""
    if rounds < 1:
        raise UserError("--rounds must be at least 1")
    progress = progress or Progress(enabled=False)
    tolerance = replace(tolerance or Tolerance(), unproven_exact=not unsafe_fixes)
    here = Checkout.of(root or os.getcwd())
    with scratch_dirs.scratch_dir("fix") as tmp:
        scratch = Path(tmp)
        opening = Trials(command, here, here, rules, scratch, backend=backend, calls=calls, progress=progress)
        opening.expect(2)
        opening.prefix = "round 1, "
        first = opening.run_user_tree("the program as it is")
        check_before(first)
        user = Checkout.of(here.cwd, first.profile)  # the project, with the program's own import paths
        work = user.copy_to(scratch / "work")
        trials = Trials(command, work, user, rules, scratch, backend=backend, calls=calls, progress=progress)
        trials.runs, trials.planned = opening.runs, opening.planned
        result = FixPoint(command=list(command), first=first, last=first, unsafe_fixes=unsafe_fixes)
        state, plan = _run_rounds(
            result,
            trials,
            work,
            rules,
            rounds=rounds,
            unsafe_fixes=unsafe_fixes,
            tolerance=tolerance,
            apply_options=apply_options,
            progress=progress,
        )
        if state is not first and _nothing_gained(first, state, result.kept, rules):
            _drop_every_kept(result, first, state)
            state, work = first, user  # the user's tree, as the first run ran it
            plan = plan_result(work.cwd, first.profile, rules, unsafe_fixes=unsafe_fixes, apply_options=apply_options)
        result.last, result.runs = state, trials.runs
        if state is not first:
            kept = result.kept
            result.verification = compare_runs(
                first,
                state,
                command=command,
                fixes=kept,
                tolerance=tolerance,
                allows=allowances(kept, rules),
                each_proven=True,
            )
        result.rewrites = _rewrites(user, work, result.kept)
        result.sites = _site_rows(first, state, user, work)
        result.remaining = _remaining(state, work, plan.findings, result, unsafe_fixes)
        result.profile = _fixed_profile(state, plan.findings, result, unsafe_fixes)
        if not unsafe_fixes:
            result.not_tried = _trade_offs(state.profile, plan.findings)
        if write and result.rewrites:
            _write_back(user, result.rewrites)
    return result


def _run_rounds(
    result: FixPoint,
    trials: Trials,
    work: Checkout,
    rules: tuple[Rule, ...],
    *,
    rounds: int,
    unsafe_fixes: bool,
    tolerance: Tolerance,
    apply_options: dict | None,
    progress: Progress,
) -> tuple[Run, ApplyResult]:
    """Round after round in the working copy, from ``result.first``, until nothing new is left to
    try, nothing verifies, or ``rounds`` ran (``result``'s rounds, errors, converged and pending
    are filled in). Returns the last kept run and the plan of the working copy after it."""
    command = result.command
    state = result.first
    tried: set[tuple] = set()
    plan: ApplyResult | None = None
    for number in range(1, rounds + 1):
        plan = plan_result(work.cwd, state.profile, rules, unsafe_fixes=unsafe_fixes, apply_options=apply_options)
        result.errors.extend(e for e in plan.errors if e not in result.errors)
        candidates = [f for f in _candidates(plan.findings, unsafe_fixes) if _key(f, work) not in tried]
        if not candidates:
            result.converged = True
            break
        tried.update(_key(f, work) for f in candidates)
        progress.say(f"round {number}: {len(candidates)} fix(es) to try")
        trials.prefix = f"round {number}, "
        trials.expect(1)
        selection = trials.select(state, candidates, command=command, tolerance=tolerance)
        result.rounds.append(Round(number, candidates, selection.kept, selection.dropped, selection.verification))
        if not selection.kept or selection.last is None:
            result.converged = True
            break
        progress.say(f"round {number}: kept {len(selection.kept)}, dropped {len(selection.dropped)}")
        apply_fixes(work.cwd, selection.kept, rules)
        state = selection.last
        plan = None
    if plan is None:  # the last round kept fixes: is anything new left to try?
        plan = plan_result(work.cwd, state.profile, rules, unsafe_fixes=unsafe_fixes, apply_options=apply_options)
        left = [f for f in _candidates(plan.findings, unsafe_fixes) if _key(f, work) not in tried]
        result.converged, result.pending = not left, left
    return state, plan


def _nothing_gained(first: Run, last: Run, kept: list[Finding], rules: tuple[Rule, ...]) -> bool:
    """Did the kept fixes, together, leave the program compiling as often (and hitting the limit
    as often) as at first? Each round keeps a fix that changes the recompiles' reasons (torch names
    the first guard that fails: a fix can uncover the next, for a later round); where none pays off
    in the end, they changed nothing. A compile-time fix (RF004: "same_compiles") is judged on
    its own terms."""
    return "same_compiles" not in allowances(kept, rules) and not fewer_compiles(first, last)


def _drop_every_kept(result: FixPoint, first: Run, last: Run) -> None:
    compiles = [compile_totals(run)[0] for run in (first, last)]
    why = f"{NO_OP}: with every fix kept, the program compiles {compiles[0]} -> {compiles[1]} times"
    for round_ in result.rounds:
        round_.dropped.extend((finding, [why]) for finding in round_.kept)
        round_.kept = []


def _write_back(user: Checkout, rewrites: list[FileRewrite]) -> None:
    """Write the kept fixes into the user's files, unless one changed while they were verified."""
    moved = [
        r.path
        for r in rewrites
        if sha256_bytes(source_bytes(resolve(r.path, user.cwd))) != sha256_bytes(r.before.encode("utf-8"))
    ]
    if moved:
        raise UserError(f"{moved[0]}: changed while the fixes were being verified; not changed")
    write_rewrites(user.cwd, rewrites)


def _candidates(findings: list[Finding], unsafe_fixes: bool) -> list[Finding]:
    """The fixes a round tries: those `apply` would make, and in safe mode also the unproven
    ones (the rule could not tell statically; the run tells, ``judge``)."""
    return [f for f in findings if is_selected(f, unsafe_fixes=unsafe_fixes) or f.unproven]


def _trade_offs(profile: Profile, findings: list[Finding]) -> list[tuple[Finding, int]]:
    """The trade-off fixes safe mode leaves untried, each with how many recompiles of
    ``profile`` it is about (0: none of its recompiles is left, not worth naming)."""
    out = []
    for finding in findings:
        if finding.safety is not Safety.UNSAFE or finding.unproven:
            continue
        out.append((finding, sum(covered(profile, finding).values())))
    return out


def _key(finding: Finding, tree: Checkout) -> tuple:
    """A Finding, recognisable in a later round: its rule, file, message and the code on its line
    (line numbers move as fixes go in above it; counts in the message change as fixes go in:
    `(4 compiles)` in round 1 is `(3 compiles)` in round 2)."""
    try:
        lines = source_bytes(resolve(finding.file, tree.cwd)).decode("utf-8").splitlines()
        code = lines[finding.location.line - 1].strip()
    except (OSError, UnicodeDecodeError, IndexError, UserError):
        code = str(finding.location.line)
    return (finding.rule, finding.file, re.sub(r"\d+", "#", finding.message), code)


def _rewrites(user: Checkout, work: Checkout, kept: list[Finding]) -> list[FileRewrite]:
    """Each file the kept fixes changed: the user's text, and the working copy's."""
    rewrites = []
    for path in sorted({f.file for f in kept}):
        before = source_bytes(resolve(path, user.cwd)).decode("utf-8")
        after = source_bytes(resolve(path, work.cwd)).decode("utf-8")
        if before != after:
            rewrites.append(FileRewrite(path=path, before=before, after=after))
    return rewrites


def _fixed_profile(state: Run, findings: list[Finding], result: FixPoint, unsafe_fixes: bool) -> Profile:
    """The last run's Profile, for the user's tree once written: a converged fix leaves nothing
    pending in it (a fix that did not verify stays out: its files are marked as `apply` marks
    the files it fixed), so `apply --check`, the hooks and the editor agree with `fix`."""
    profile = replace(state.profile, applied=dict(state.profile.applied))  # the run's own stays as it was
    if result.converged:
        for finding in select_fixes(findings, unsafe_fixes=unsafe_fixes):
            digest = profile.sources.get(finding.file)
            if digest is not None:
                profile.applied[finding.file] = digest
    return profile


# -- the closing table --------------------------------------------------------------------------


def _line(tree: Checkout, file: str, line: int) -> str:
    try:
        return source_bytes(resolve(file, tree.cwd)).decode("utf-8").splitlines()[line - 1].strip()
    except (OSError, UnicodeDecodeError, IndexError, UserError):
        return ""


def _site_counts(frame: Frame | None, tree: Checkout, moved: Callable[[str, int], int]) -> dict[tuple, tuple[str, int]]:
    """Per call site (file, line in the last run's text), its label and how often it compiled
    the frame; ``moved`` maps a line to where it is in the last run's text."""
    counts: dict[tuple, tuple[str, int]] = {}
    for compile_ in frame.compiles if frame else []:
        if compile_.limit_hit:
            continue
        site = compile_.call_site
        key: tuple[str | int, ...]
        if site is None:
            key, label = ("?",), "(no call site recorded)"
        else:
            code = _line(tree, site.file, site.line)
            key, label = (
                (site.file, moved(site.file, site.line)),
                f"{site.file}:{site.line}" + (f"  {code}" if code else ""),
            )
        label, n = counts.get(key, (label, 0))
        counts[key] = (label, n + 1)
    return counts


def _line_moves(user: Checkout, work: Checkout) -> Callable[[str, int], int]:
    """Where a line of the user's file is in the working copy's: lines the fixes replaced map to
    their replacements, one for one, or, where the fix also inserted lines (marks above a call it
    rewrote), each to the most alike of them, in order."""
    maps: dict[str, dict[int, int]] = {}

    def moved(path: str, line: int) -> int:
        if path not in maps:
            maps[path] = {}
            try:
                before = source_bytes(resolve(path, user.cwd)).decode("utf-8").splitlines()
                after = source_bytes(resolve(path, work.cwd)).decode("utf-8").splitlines()
            except (OSError, UnicodeDecodeError, UserError):
                before = after = []
            matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                    maps[path].update((i1 + k + 1, j1 + k + 1) for k in range(i2 - i1))
                elif tag == "replace":
                    maps[path].update(_most_alike(before, after, i1, i2, j1, j2))
        return maps[path].get(line, -line)

    return moved


def _most_alike(before: list[str], after: list[str], i1: int, i2: int, j1: int, j2: int) -> dict[int, int]:
    """Old lines ``i1:i2`` to the new lines ``j1:j2`` most like each (1-based), in order, where
    at least half alike: `f(x, t.item())` is `f(x, torch.tensor(t.item(), ...))` under its marks."""
    found: dict[int, int] = {}
    start = j1
    for i in range(i1, i2):
        scored = [(difflib.SequenceMatcher(a=before[i], b=after[j]).ratio(), j) for j in range(start, j2)]
        best = max(scored, default=(0.0, -1))
        if best[0] >= 0.5:
            found[i + 1] = best[1] + 1
            start = best[1] + 1
    return found


def _site_rows(first: Run, last: Run, user: Checkout, work: Checkout) -> list[SiteRow]:
    before = {(f.file, f.first_line, f.name): f for f in first.profile.frames}
    after = {(f.file, f.first_line, f.name): f for f in last.profile.frames}
    moved = _line_moves(user, work)
    rows = []
    for row in match_frames(first.profile, last.profile):
        b = before.get((row.file, row.line_before, row.name)) if row.line_before is not None else None
        a = after.get((row.file, row.line_after, row.name)) if row.line_after is not None else None
        b_sites, a_sites = _site_counts(b, user, moved), _site_counts(a, work, lambda path, line: line)
        for key in list(a_sites) + [k for k in b_sites if k not in a_sites]:
            label = a_sites.get(key, b_sites.get(key, ("", 0)))[0]
            rows.append(SiteRow(row.label, label, b_sites.get(key, ("", 0))[1], a_sites.get(key, ("", 0))[1]))
    return rows


def _phrase(reason: Reason) -> str:
    words = REASON_KINDS.get(reason.kind, reason.kind)
    what = f"`{reason.source}`" if reason.source and reason.kind != "limit_hit" else ""
    if reason.dim is not None:
        what += f" dim {reason.dim}"
    if reason.expected is not None and reason.actual is not None:
        what += f" ({reason.expected} -> {reason.actual})"
    return f"{words}: {what.strip()}" if what.strip() else words


def _remaining(state: Run, work: Checkout, findings: list[Finding], result: FixPoint, unsafe: bool) -> list[Remaining]:
    rows = []
    dropped = result.dropped
    for frame in state.profile.frames:
        label = f"{frame.name} ({frame.file}:{frame.first_line})"
        for compile_ in frame.compiles:
            if not (compile_.is_recompile or compile_.limit_hit):
                continue
            site = compile_.call_site
            where = f"{site.file}:{site.line}" if site else "?"
            # One phrase per guarded value: every cache entry torch tried fails on it in its own way.
            distinct = {(r.kind, r.source, r.dim): r for r in reversed(compile_.reasons)}
            reasons = [_phrase(r) for r in reversed(distinct.values())] or ["no reason recorded"]
            why = why_it_stays(compile_, label, findings, dropped, unsafe)
            rows.append(Remaining(label, where, compile_.id, "; ".join(reasons), why))
    return rows


def why_it_stays(
    compile_: Compile,
    frame: str,
    findings: list[Finding],
    dropped: list[tuple[Finding, list[str]]],
    unsafe_fixes: bool,
) -> str:
    """Why a recompile the last run still made stays: legitimate (train vs eval, grad mode), a
    torch limitation (0/1 specialisation), a fix that did not verify or needs --unsafe-fixes, a
    rule that makes no edit here (its note), or no rule for the reason. The reasons are those of
    every cache entry torch tried; the recompile stays for the first one that is not legitimate
    (the entry of the same mode is the one that could have served the call)."""
    reasons = compile_.reasons
    if compile_.limit_hit:
        return "the recompile limit: torch stopped compiling this frame (it runs eagerly from here on)"
    legitimate = {"training_flag": "legitimate: train vs eval mode", "grad_mode": "legitimate: grad mode (no_grad)"}
    blocking = [r for r in reasons if r.kind not in legitimate and expected_why(r) is None]
    if not blocking:
        whys = (legitimate.get(r.kind) or f"legitimate: {expected_why(r)}" for r in reasons)
        return "; ".join(dict.fromkeys(whys)) or "no reason recorded"
    # The entry of the call's own kind is the one that could have served it: a prefill whose
    # prompt length changed fails the decode step's entry on size 1 too, and the length is why.
    reason = next((r for r in blocking if not _zero_one(r)), blocking[0])
    if _zero_one(reason):
        return "torch limitation: sizes 0 and 1 are specialised, even when marked dynamic (0/1 specialisation)"
    failed = _closest([(f, why) for f, why in dropped], frame, reason)
    if failed:
        return f"a fix did not verify: {_short(failed[1][0])}"
    closest = _closest([(f, None) for f in findings], frame, reason)
    finding = closest[0] if closest else None
    if finding is not None and finding.safety is Safety.UNSAFE and not unsafe_fixes:
        note = f": {_short(finding.notes[0])}" if finding.notes else ""
        if finding.unproven:
            return f"an unproven fix ({finding.rule}) that was not tried{note}"
        return f"a trade-off fix ({finding.rule}, with --unsafe-fixes){note}"
    if finding is not None and finding.safety is Safety.NONE:
        return (
            f"no fix ({finding.rule}): {_short(finding.notes[0]) if finding.notes else 'the rule makes no edit here'}"
        )
    if finding is not None:
        return f"{finding.rule}'s fix is in the code; torch still recompiles"
    return f"no rule for this reason ({reason.kind})"


def _zero_one(reason: Reason) -> bool:
    """A size guard 0/1 specialisation explains: a size of 0 or 1 the entry was compiled for (not
    a parameter's or buffer's, whose shapes are static whatever they are: a swapped layer)."""
    if reason.kind == "size_specialization":
        return True
    source = reason.source or ""
    held = "._parameters[" in source or "._buffers[" in source
    return reason.kind == "size_mismatch" and reason.expected in (0, 1) and not held


def _closest(candidates: list[tuple[Finding, Any]], frame: str, reason: Reason) -> tuple[Finding, Any] | None:
    """The candidate whose Finding is most closely about this reason of the frame: one whose
    ``covers`` names the guarded source, else one covering its kind there (as the accounting
    reads them: ``covers_reason``); a Finding that says nothing of what it covers, by its
    evidence (``_explains``)."""

    def score(finding: Finding) -> int:
        if not finding.covers:
            return int(_explains(finding, frame, reason))
        # The frame as the Finding's run labelled it: the fixes kept above it move its first line.
        labels = {e.get("frame") for e in finding.covers if _unlined(e.get("frame")) == _unlined(frame)}
        return max((covers_reason(finding, label, reason) for label in labels if label), default=0)

    scored = [(score(c[0]), c) for c in candidates]
    best = max((score for score, _ in scored), default=0)
    return next((c for score, c in scored if score == best), None) if best else None


def _unlined(label: str | None) -> str:
    """A frame's label without the lines an edit above it shifts: ``forward (prog.py:21)`` ->
    ``forward (prog.py)``, a resume piece's name as ``without_line`` spells it."""
    name, _, where = (label or "").partition(" (")
    return without_line(name) + " (" + re.sub(r":\d+\)$", ")", where)


def _explains(finding: Finding, frame: str, reason: Reason) -> bool:
    """Is ``finding`` about this reason of this frame: its rule consumes the reason's kind, and
    its evidence names the guard, or its message the guarded value (evidence keeps a few guard
    texts only)?"""
    if finding.evidence.get("frame") != frame and frame not in finding.evidence.get("also_frames", []):
        return False
    if reason.kind not in _consumed(finding.rule):
        return False
    guards = finding.evidence.get("guards") or []
    named = bool(reason.source) and f"`{reason.source}`" in finding.message
    return not guards or reason.text.split("\n", 1)[0] in guards or named


def _short(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters, cut after a clause (`: `, `; `) where one ends
    in its second half, else between words, never inside one (a trial: "marked fro…")."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    clause = max(head.rfind(": "), head.rfind("; "))
    cut = clause if clause > limit // 2 else head.rfind(" ")
    return (head[:cut] if cut > 0 else head).rstrip(" ,:;") + "\u2026"


def _consumed(rule_id: str) -> tuple[str, ...]:
    from recompile_fix.rules import rule_by_id

    rule = rule_by_id(rule_id)
    return rule.consumes if rule is not None else ()
