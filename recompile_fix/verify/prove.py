"""The two commands that prove fixes by running them: ``verify`` (every planned fix, one run on
a copy) and ``apply_verified`` (keep only the fixes that make nothing worse)."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from recompile_fix.edits.rewrite import FileRewrite
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import TRADE_OFF, Finding, Safety, stands_in_for
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.fix import ApplyResult, rewrite_files, run_apply, select_fixes, write_rewrites
from recompile_fix.profile import scratch
from recompile_fix.profile.compiled_outputs import DEFAULT_CALLS
from recompile_fix.profile.model import Profile, resolve, sha256_bytes
from recompile_fix.progress import Progress
from recompile_fix.verify.compare import Tolerance, Verification, allowances, compare_runs
from recompile_fix.verify.judge import NO_OP, changes_nothing, suspects
from recompile_fix.verify.runs import Run, check_before, check_copy_used, run_command
from recompile_fix.verify.tree import Checkout

__all__ = [
    "LOG_DIR",
    "Selection",
    "Trials",
    "VerifiedApply",
    "apply_fixes",
    "apply_verified",
    "compile_totals",
    "fewer_compiles",
    "plan_fixes",
    "plan_result",
    "profiled_files",
    "select_verified",
    "verify",
]

LOG_DIR = ".recompile-fix/verify"


def plan_fixes(
    root: Path,
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    paths=None,
    unsafe_fixes: bool = False,
    apply_options: dict | None = None,
) -> tuple[list[Finding], list[str]]:
    """The fixes `apply` would make under ``paths`` of ``root`` (and its per-file errors).
    ``paths``: by default the files of the program the Profile names under ``root``, so that
    static mode plans nothing in unrelated files."""
    result = plan_result(root, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options)
    return select_fixes(result.findings, unsafe_fixes=unsafe_fixes), list(result.errors)


def plan_result(
    root: Path,
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    paths=None,
    unsafe_fixes: bool = False,
    apply_options: dict | None = None,
) -> ApplyResult:
    """`apply`'s whole result (Findings, those already in the code, errors) for the Profile's
    files under ``root``, nothing written."""
    if paths is None:
        paths = profiled_files(root, profile)
    if not paths:
        return ApplyResult()
    return run_apply(
        [str(Path(root, p)) for p in paths],
        copy.deepcopy(profile),
        rules,
        root=str(root),
        unsafe_fixes=unsafe_fixes,
        write=False,
        **(apply_options or {}),
    )


def profiled_files(root: Path, profile: Profile) -> list[str]:
    """The program's files the Profile names under ``root`` (its paths relative to it)."""
    return sorted(p for p in profile.sources if not os.path.isabs(p) and Path(root, p).is_file())


def apply_fixes(
    root: Path, fixes: list[Finding], rules: tuple[Rule, ...], *, write: bool = True, profile: Profile | None = None
) -> list[FileRewrite]:
    """Rewrite the files of ``root`` with exactly these fixes (and write them, remembering what
    was written in ``profile``); a file that cannot be rewritten is an error."""
    rewrites, failed = rewrite_files(root, fixes, rules)
    if failed:
        raise UserError(failed[0][1])
    rewrites = [r for r in rewrites if r.changed]
    if write:
        write_rewrites(root, rewrites, profile)
    return rewrites


def _logs(root: Path) -> Path:
    return root / LOG_DIR


def _describe(fixes: list[Finding]) -> str:
    if len(fixes) == 1:
        f = fixes[0]
        return f"with {f.rule} at {f.file}:{f.location.line}"
    return f"with {len(fixes)} fixes"


def verify(
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    paths=None,
    backend: str | None = None,
    unsafe_fixes: bool = False,
    tolerance: Tolerance | None = None,
    fail_on_recompile: bool = False,
    calls: int = DEFAULT_CALLS,
    apply_options: dict | None = None,
    progress: Progress | None = None,
) -> Verification:
    """Run ``command`` on the tree as it is and on a copy of the project with every planned fix;
    compare. ``root``: where the command runs (default: here)."""
    user = Checkout.of(root or os.getcwd(), profile)
    tolerance = replace(tolerance or Tolerance(), unproven_exact=not unsafe_fixes)
    with scratch.scratch_dir("verify") as tmp:
        tree = user.copy_to(Path(tmp) / "tree")
        fixes, errors = plan_fixes(
            tree.cwd, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options
        )
        if not fixes:
            return Verification(
                command=list(command), errors=errors, ran=False, tolerance=tolerance, notes=["no fixes to verify"]
            )
        before = run_command(
            command,
            at=user,
            backend=backend,
            log=_logs(user.cwd) / "before.log",
            calls=calls,
            progress=progress,
            label="run 1/2: your tree as it is",
        )
        check_before(before)
        apply_fixes(tree.cwd, fixes, rules)
        after = run_command(
            command,
            at=tree,
            user=user,
            backend=backend,
            log=_logs(user.cwd) / "after.log",
            calls=calls,
            fail_on_recompile=fail_on_recompile,
            progress=progress,
            label=f"run 2/2: a copy {_describe(fixes)}",
        )
        check_copy_used(after, user)
    v = compare_runs(before, after, command=command, fixes=fixes, tolerance=tolerance, allows=allowances(fixes, rules))
    v.errors = errors
    v.calls = calls
    v.fail_on_recompile = fail_on_recompile
    if fail_on_recompile and not _has_set_stance():
        v.notes.append("this torch has no torch.compiler.set_stance: --fail-on-recompile was not checked")
    return v


def _has_set_stance() -> bool:
    try:
        import torch.compiler
    except ImportError:
        return True  # no torch here (recompile-fix in a venv of its own): the run's log says it
    return hasattr(torch.compiler, "set_stance")


@dataclass
class Selection:
    """Which fixes verification kept, against one run of the program before them."""

    kept: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, list[str]]] = field(default_factory=list)  # (fix, what went wrong)
    verification: Verification | None = None  # before vs. the kept fixes
    last: Run | None = None  # the run of the kept fixes


def select_verified(
    before: Run,
    fixes: list[Finding],
    trial: Callable[[list[Finding], str], Run],
    rules: tuple[Rule, ...],
    *,
    command: list[str],
    tolerance: Tolerance,
    expect: Callable[[int], None] | None = None,
    adds_no_edit: Callable[[list[Finding], Finding], bool] | None = None,
) -> Selection:
    """Keep the fixes that make nothing worse than ``before`` and change something: all
    together when that verifies (one trial), else one at a time (a trial each), each compared
    with the last accepted run, so the kept set is exactly what the last accepted run ran.
    Where the set mixes fixes the rules proved with unproven ones (``Finding.unproven``) or
    trade-offs, the proven ones are tried together first, then each unproven one, then each
    trade-off, on top; a fallback (``Finding.fallback``) last, where its preferred fix was not
    kept. A fix in a set that
    verified whose own recompiles all stay (``judge.suspects``) is tried out: one more run
    without it, and it goes when that run compiles alike (it changes nothing on this program).
    ``trial(fixes, what)`` runs the program with exactly those fixes; ``expect(n)`` hears of n
    more trials to come (n < 0: fewer); ``adds_no_edit(kept, fix)``: does ``fix`` write nothing the kept ones do
    not (two rules' `dynamic=True` at one compile call): kept with them, without a run."""
    picker = _Picker(before, trial, rules, command=command, tolerance=tolerance, expect=expect)
    picker.adds_no_edit = adds_no_edit or (lambda kept, fix: False)
    # A fallback waits for its preferred fix's trial: tried only where that one is not kept.
    fallbacks = [f for f in fixes if any(stands_in_for(f, other) for other in fixes)]
    fixes = [f for f in fixes if all(f is not b for b in fallbacks)]
    if fixes and picker.together(fixes, must_reduce=len(fixes) > 1):
        picker.unproven_pay(fixes)
    elif len(fixes) > 1:
        # Those the rules proved first (together, when they verify so), then each unproven one
        # and each trade-off on top: a trade-off that fails the run (`dynamic=True` tripping an
        # assertion in torch) or splits a frame must not cost the proven ones their trial together.
        groups = [
            group
            for group in (
                [f for f in fixes if not f.unproven and not _trade_off(f)],
                [f for f in fixes if f.unproven],
                [f for f in fixes if _trade_off(f)],
            )
            if group
        ]
        if len(groups) == 1:
            picker.one_by_one(fixes)
        else:
            first, *rest = groups
            if len(first) == 1 or not picker.together(first):
                picker.one_by_one(first)
            for group in rest:
                picker.one_by_one(group)
        if not picker.result.kept and picker.unreduced is not None:
            # None paid off alone either: the set that changed the recompiles' reasons stays, as
            # a later round may fix the guard it uncovered.
            dropped, picker.result.dropped = picker.result.dropped, []
            if expect is not None:
                expect(1)
            if not picker.together(picker.unreduced):
                picker.result.dropped = dropped
    for fallback in fallbacks:  # one whose preferred fix was kept is not tried, nor reported,
        preferred = next((k for k in picker.result.kept if stands_in_for(fallback, k)), None)
        if preferred is None:
            picker.one_by_one([fallback])
        elif picker.compare(before, picker.reference, picker.result.kept).rounded:
            picker.instead(preferred, fallback)  # unless that one only rounds: this may be exact
    result = picker.result
    if result.last is not None and result.verification is None:  # kept one at a time, each on its own terms
        result.verification = picker.compare(before, result.last, result.kept, each_proven=True)
    return result


class _Picker:
    """``select_verified``'s state: the fixes kept so far and the run that ran exactly them."""

    def __init__(self, before: Run, trial, rules, *, command, tolerance, expect):
        self.before, self.trial, self.rules = before, trial, rules
        self.command, self.tolerance, self.expect = command, tolerance, expect
        self.result = Selection()
        self.reference = before  # the run of the fixes kept so far
        self.unreduced: list[Finding] | None = None  # a set that verified without fewer compiles
        self.adds_no_edit: Callable[[list[Finding], Finding], bool] = lambda kept, fix: False

    def compare(
        self, reference: Run, run: Run, fixes: list[Finding], kept: list[Finding] | None = None, each_proven=False
    ):
        allowed = allowances((kept if kept is not None else []) + fixes, self.rules)
        return compare_runs(
            reference,
            run,
            command=self.command,
            fixes=fixes,
            tolerance=self.tolerance,
            allows=allowed,
            each_proven=each_proven,
        )

    def _keep(self, fixes: list[Finding], run: Run) -> None:
        self.result.kept.extend(fixes)
        self.reference = self.result.last = run

    def _more(self, run: Run, fixes: list[Finding]) -> str:
        """Why ``run`` is worse than the reference in all, though each frame's own judgment passed:
        a graph break's resumed frame can recompile for what another fix had made a tensor, so
        the split frame compiles less and the program more. "" where it is not (or where the fixes
        trade compiles for compile time by design: RF004)."""
        if "same_compiles" in allowances(fixes, self.rules):
            return ""
        more = _more_compiles(self.reference, run)
        return f"makes things worse: the program compiles {more}" if more else ""

    def together(self, fixes: list[Finding], *, must_reduce: bool = False) -> bool:
        """Try ``fixes`` on top of those kept, in one run; keep them when they verify (those that
        turn out to change nothing aside). False, and nothing kept, when they do not, or (with
        ``must_reduce``) when they verify without fewer compiles or limit hits: one fix can
        undo another's gain (a graph break that splits a frame whose scalar another fix wraps),
        and one at a time finds the one that pays."""
        kept = list(self.result.kept)
        what = _describe(fixes) if not kept else f"+ {len(fixes)} fixes"
        run = self.trial(kept + fixes, what)
        check = self.compare(self.reference, run, fixes, kept)
        more = self._more(run, fixes) if check.verified else ""
        if not check.verified or more:
            if len(fixes) == 1:
                self.result.dropped.append((fixes[0], [more] if more else check.regressions))
            return False
        if (
            must_reduce
            and not fewer_compiles(self.reference, run)
            and "same_compiles" not in allowances(fixes, self.rules)
        ):
            self.unreduced = fixes
            return False
        doubt = suspects(self.reference.profile, run.profile, fixes, _same_compiles(self.rules))
        rest = [f for f in fixes if all(f is not d for d in doubt)]
        if doubt and rest:
            if self.expect is not None:
                self.expect(1)
            named = ", ".join(f"{f.rule} at {f.file}:{f.location.line}" for f in doubt[:2])
            without = self.trial(kept + rest, f"without {named} (their recompiles stay)")
            if (
                changes_nothing(run.profile, without.profile)
                and self.compare(self.reference, without, rest, kept).verified
            ):
                self._keep(rest, without)
                self.result.dropped.extend(
                    (f, [f"{NO_OP}: the recompiles it is about stay, and the run without it compiles alike"])
                    for f in doubt
                )
                if not kept:
                    self.result.verification = self.compare(self.before, without, rest)
                return True
        self._keep(fixes, run)
        if not kept:
            self.result.verification = check
        return True

    def unproven_pay(self, fixes: list[Finding]) -> None:
        """Where a kept set mixed fixes the rules proved with unproven ones (or trade-offs) and
        recompiles remain, one more run with the proven ones alone: the others go where it
        compiles no more (a new user's GAN: an unproven mark on `fake.detach()` added a compile,
        and the set, 8 -> 5, hid that the proven marks alone made 4)."""
        proven = [f for f in fixes if not f.unproven and not _trade_off(f)]
        others = [f for f in fixes if f.unproven or _trade_off(f)]
        kept = self.result.kept
        compiles = compile_totals(self.reference)[0]
        if not proven or not others or compiles <= len(self.reference.profile.frames):
            return  # no recompile left: no fix in the set can be adding one
        if any(all(k is not f for k in kept) for f in fixes):
            return  # some were tried out as changing nothing: the set is not the one kept
        if self.expect is not None:
            self.expect(1)
        run = self.trial(proven, f"the {len(proven)} fixes the rules proved alone")
        check = self.compare(self.before, run, proven)
        if not check.verified or compile_totals(run) > compile_totals(self.reference):
            return
        alone = compile_totals(run)[0]
        self.result.kept, self.reference, self.result.last = list(proven), run, run
        self.result.verification = check
        why = f"adds nothing on this program: the fixes the rules proved compile it {alone} times alone, {compiles} with it"
        self.result.dropped.extend((f, [why]) for f in others)

    def instead(self, preferred: Finding, fallback: Finding) -> None:
        """``fallback`` in place of a kept ``preferred`` whose outputs only round (kept with
        --unsafe-fixes): kept instead where the outputs are then bit for bit, with no more
        compiles (RF003's `dynamic=True` beside its tensor lr, 1e-8 off)."""
        if self.expect is not None:
            self.expect(1)
        others = [f for f in self.result.kept if f is not preferred]
        run = self.trial(others + [fallback], f"{fallback.rule} at {fallback.file}:{fallback.location.line} instead")
        check = self.compare(self.before, run, others + [fallback])
        if check.verified and not check.rounded and compile_totals(run) <= compile_totals(self.reference):
            self.result.kept = others + [fallback]
            self.reference = self.result.last = run
            self.result.verification = None
            why = f"{fallback.rule} at {fallback.file}:{fallback.location.line} fixes the same recompiles bit for bit"
            self.result.dropped.append((preferred, [f"kept instead: {why}"]))

    def one_by_one(self, fixes: list[Finding]) -> None:
        """Each fix on top of those kept. Those that alone change nothing are tried once more, all
        together, at the end: scalars of one call that recompile until every one is a tensor (a
        sampler's `t`, `beta` and `1 - beta`), where the first try failed on another fix."""
        if self.expect is not None:
            self.expect(len(fixes))
        # Trade-offs last: a graph break kept first can split the frame another fix pays off in.
        fixes = sorted(fixes, key=_trade_off)
        idle: list[tuple[Finding, list[str]]] = []
        for fix in fixes:
            if self.result.kept and self.adds_no_edit(self.result.kept, fix):
                # Its edit is a kept fix's (deduplicated in the rewrite): a run of it would be the
                # last run again, and "changes nothing" would be said of an edit that is kept.
                self.result.kept.append(fix)
                if self.expect is not None:
                    self.expect(-1)  # the run counted for it is not made
                continue
            run = self.trial(self.result.kept + [fix], f"+ {fix.rule} at {fix.file}:{fix.location.line}")
            check = self.compare(self.reference, run, [fix], self.result.kept)
            more = self._more(run, [fix]) if check.verified else ""
            if more:
                self.result.dropped.append((fix, [more]))
            elif check.verified:
                self._keep([fix], run)
            elif check.regressions and all(r.startswith(NO_OP) for r in check.regressions):
                idle.append((fix, check.regressions))
            else:
                self.result.dropped.append((fix, check.regressions))
        if len(idle) > 1:
            if self.expect is not None:
                self.expect(1)
            if self.together([f for f, _ in idle]):
                idle = []
        self.result.dropped.extend(idle)
        self.result.verification = None  # before against the kept set: made at the end


def _trade_off(fix: Finding) -> bool:
    """A fix that changes performance by design (a graph break, regional compilation, `dynamic=True`)."""
    return fix.safety is Safety.UNSAFE and fix.unsafe_because == TRADE_OFF


def compile_totals(run: Run) -> tuple[int, int]:
    """How often the program compiled, and hit the recompile limit, in all."""
    return sum(f.compile_count for f in run.profile.frames), sum(f.limit_hits for f in run.profile.frames)


def fewer_compiles(reference: Run, run: Run) -> bool:
    """Did ``run`` compile less often, or hit the recompile limit less often, than ``reference``?"""
    (compiles, limits), (compiles_now, limits_now) = compile_totals(reference), compile_totals(run)
    return compiles_now < compiles or limits_now < limits


def _more_compiles(reference: Run, run: Run) -> str:
    """``"N -> M times"`` where ``run`` compiled more often in all than ``reference``, else ""."""
    (compiles, limits), (compiles_now, limits_now) = compile_totals(reference), compile_totals(run)
    return f"{compiles} -> {compiles_now} times" if compiles_now > compiles and limits_now >= limits else ""


def _same_compiles(rules: tuple[Rule, ...]) -> set[str]:
    """The rules whose fixes keep the compiles on purpose (each gets cheaper: RF004)."""
    return {rule.id for rule in rules if "same_compiles" in rule.verify_allows}


@dataclass
class VerifiedApply:
    kept: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, list[str]]] = field(default_factory=list)  # (fix, what went wrong)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    verification: Verification | None = None  # before vs. the kept fixes
    runs: int = 0


class Trials:
    """Runs of the command on fresh copies of a snapshot of the project, each with a set of
    fixes, counted and shown as "run i/n" (n grows as trials are planned)."""

    def __init__(
        self,
        command: list[str],
        snapshot: Checkout,
        user: Checkout,
        rules: tuple[Rule, ...],
        scratch: Path,
        *,
        backend: str | None,
        calls: int,
        progress: Progress | None,
        prefix: str = "",
    ):
        self.command, self.snapshot, self.user, self.rules, self.scratch = command, snapshot, user, rules, scratch
        self.backend, self.calls, self.progress, self.prefix = backend, calls, progress, prefix
        self.runs = 0
        self.planned = 0

    def expect(self, more: int) -> None:
        """``more`` runs are coming (after the one under way, if any); a negative ``more``: that
        many fewer than said (a fix kept without a run of its own)."""
        if more < 0:
            self.planned = max(self.runs, self.planned + more)
        else:
            self.planned = max(self.planned, self.runs + more)

    def label(self, what: str) -> str:
        self.runs += 1
        self.planned = max(self.planned, self.runs)
        return f"{self.prefix}run {self.runs}/{self.planned}: {what}"

    def run_user_tree(self, what: str = "your tree as it is") -> Run:
        """The command on the user's own tree (nothing changed in it but what the program does)."""
        return run_command(
            self.command,
            at=self.user,
            backend=self.backend,
            log=_logs(self.user.cwd) / "before.log",
            calls=self.calls,
            progress=self.progress,
            label=self.label(what),
        )

    def adds_no_edit(self, kept: list[Finding], fix: Finding) -> bool:
        """Do ``kept`` and ``kept + [fix]`` rewrite the snapshot alike (no program run)?"""
        if all(k.file != fix.file for k in kept):
            return False

        def texts(fixes: list[Finding]) -> dict[str, str] | None:
            rewrites, failed = rewrite_files(self.snapshot.cwd, fixes, self.rules)
            return None if failed else {r.path: r.after for r in rewrites if r.changed}

        before = texts(kept)
        return before is not None and before == texts(kept + [fix])

    def select(self, before: Run, fixes: list[Finding], *, command: list[str], tolerance: Tolerance) -> Selection:
        """``select_verified`` with these trials: their run count and their view of the edits."""
        return select_verified(
            before,
            fixes,
            self,
            self.rules,
            command=command,
            tolerance=tolerance,
            expect=self.expect,
            adds_no_edit=self.adds_no_edit,
        )

    def __call__(self, fixes: list[Finding], what: str) -> Run:
        n = self.runs + 1
        tree = self.snapshot.copy_to(self.scratch / f"trial-{n}")
        try:
            apply_fixes(tree.cwd, fixes, self.rules)
            run = run_command(
                self.command,
                at=tree,
                user=self.user,
                backend=self.backend,
                log=_logs(self.user.cwd) / f"trial-{n}.log",
                calls=self.calls,
                progress=self.progress,
                label=self.label(f"a copy {what}"),
            )
            check_copy_used(run, self.user)
        finally:
            shutil.rmtree(tree.root, ignore_errors=True)
        return run


def apply_verified(
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    paths=None,
    backend: str | None = None,
    unsafe_fixes: bool = False,
    tolerance: Tolerance | None = None,
    calls: int = DEFAULT_CALLS,
    write: bool = True,
    apply_options: dict | None = None,
    progress: Progress | None = None,
) -> VerifiedApply:
    """Apply to ``root`` only the fixes that verification confirms; report the others and why."""
    user = Checkout.of(root or os.getcwd(), profile)
    tolerance = replace(tolerance or Tolerance(), unproven_exact=not unsafe_fixes)
    result = VerifiedApply()
    with scratch.scratch_dir("verify") as tmp:
        # Before the program runs (and perhaps writes files) in the tree.
        snapshot = user.copy_to(Path(tmp) / "snapshot")
        fixes, result.errors = plan_fixes(
            snapshot.cwd, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options
        )
        if not fixes:
            return result
        trials = Trials(command, snapshot, user, rules, Path(tmp), backend=backend, calls=calls, progress=progress)
        trials.expect(2)
        before = trials.run_user_tree()
        check_before(before)
        selection = trials.select(before, fixes, command=command, tolerance=tolerance)
        result.runs = trials.runs
        result.kept, result.dropped, result.verification = selection.kept, selection.dropped, selection.verification
        if result.verification is not None:
            result.verification.errors = list(result.errors)
            result.verification.calls = calls
        if not result.kept:
            return result
        changed = [
            f.file
            for f in result.kept
            if sha256_bytes(resolve(f.file, user.cwd).read_bytes())
            != sha256_bytes(resolve(f.file, snapshot.cwd).read_bytes())
        ]
        if changed:
            raise UserError(f"{changed[0]}: changed while the fixes were being verified; not changed")
        result.rewrites = apply_fixes(user.cwd, result.kept, rules, write=write, profile=profile)
    return result
