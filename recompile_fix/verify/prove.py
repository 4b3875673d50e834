"""The two commands that prove fixes by running them: ``verify`` (every planned fix, one run on
a copy) and ``apply_verified`` (keep only the fixes that make nothing worse)."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from recompile_fix.edits.rewrite import FileRewrite
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.fix import rewrite_files, run_apply, select_fixes, write_rewrites
from recompile_fix.profile.compiled_outputs import DEFAULT_CALLS
from recompile_fix.profile.model import Profile, resolve, sha256_bytes
from recompile_fix.verify.compare import Tolerance, Verification, allowances, compare_runs
from recompile_fix.verify.runs import Run, check_before, check_copy_used, run_command
from recompile_fix.verify.tree import command_in, copy_tree

__all__ = ["LOG_DIR", "VerifiedApply", "apply_fixes", "apply_verified", "plan_fixes", "verify"]

LOG_DIR = ".recompile-fix/verify"


def plan_fixes(
    root: Path,
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    paths=(".",),
    unsafe_fixes: bool = False,
    apply_options: dict | None = None,
) -> tuple[list[Finding], list[str]]:
    """The fixes `apply` would make under ``paths`` of ``root`` (and its per-file errors)."""
    result = run_apply(
        [str(Path(root, p)) for p in paths],
        copy.deepcopy(profile),
        rules,
        root=str(root),
        unsafe_fixes=unsafe_fixes,
        write=False,
        **(apply_options or {}),
    )
    return select_fixes(result.findings, unsafe_fixes=unsafe_fixes), list(result.errors)


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


def verify(
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    paths=(".",),
    backend: str | None = None,
    unsafe_fixes: bool = False,
    tolerance: Tolerance | None = None,
    fail_on_recompile: bool = False,
    calls: int = DEFAULT_CALLS,
    apply_options: dict | None = None,
) -> Verification:
    """Run ``command`` on the tree as it is and on a copy with every planned fix; compare."""
    root = Path(root or os.getcwd()).resolve()
    tolerance = tolerance or Tolerance()
    with tempfile.TemporaryDirectory(prefix="recompile-fix-verify-") as tmp:
        tree = Path(tmp) / "tree"
        copy_tree(root, tree)
        fixes, errors = plan_fixes(
            tree, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options
        )
        if not fixes:
            return Verification(
                command=list(command), errors=errors, ran=False, tolerance=tolerance, notes=["no fixes to verify"]
            )
        before = run_command(command, cwd=root, backend=backend, log=_logs(root) / "before.log", calls=calls)
        check_before(before)
        apply_fixes(tree, fixes, rules)
        after = run_command(
            command_in(command, root, tree),
            cwd=tree,
            backend=backend,
            alias=root,
            log=_logs(root) / "after.log",
            calls=calls,
            fail_on_recompile=fail_on_recompile,
        )
        check_copy_used(after, root)
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
class VerifiedApply:
    kept: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, list[str]]] = field(default_factory=list)  # (fix, what went wrong)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    verification: Verification | None = None  # before vs. the kept fixes
    runs: int = 0


def apply_verified(
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    paths=(".",),
    backend: str | None = None,
    unsafe_fixes: bool = False,
    tolerance: Tolerance | None = None,
    calls: int = DEFAULT_CALLS,
    write: bool = True,
    apply_options: dict | None = None,
) -> VerifiedApply:
    """Apply to ``root`` only the fixes that verification confirms; report the others and why."""
    root = Path(root or os.getcwd()).resolve()
    tolerance = tolerance or Tolerance()
    result = VerifiedApply()
    with tempfile.TemporaryDirectory(prefix="recompile-fix-verify-") as tmp:
        snapshot = Path(tmp) / "snapshot"
        copy_tree(root, snapshot)  # before the program runs (and perhaps writes files) in the tree
        fixes, result.errors = plan_fixes(
            snapshot, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options
        )
        if not fixes:
            return result
        logs = _logs(root)
        before = run_command(command, cwd=root, backend=backend, log=logs / "before.log", calls=calls)
        result.runs += 1
        check_before(before)

        def trial(selected: list[Finding], n: int) -> Run:
            tree = Path(tmp) / f"trial-{n}"
            shutil.copytree(snapshot, tree, symlinks=True)
            apply_fixes(tree, selected, rules)
            run = run_command(
                command_in(command, root, tree),
                cwd=tree,
                backend=backend,
                alias=root,
                log=logs / f"trial-{n}.log",
                calls=calls,
            )
            result.runs += 1
            check_copy_used(run, root)
            shutil.rmtree(tree, ignore_errors=True)
            return run

        together = compare_runs(
            before, trial(fixes, 0), command=command, fixes=fixes, tolerance=tolerance, allows=allowances(fixes, rules)
        )
        if together.verified:
            result.kept, result.verification = list(fixes), together
        elif len(fixes) == 1:
            result.dropped.append((fixes[0], together.regressions))
        else:
            reference, last = before, None
            for n, fix in enumerate(fixes, 1):
                run = trial(result.kept + [fix], n)
                check = compare_runs(
                    reference,
                    run,
                    command=command,
                    fixes=[fix],
                    tolerance=tolerance,
                    allows=allowances(result.kept + [fix], rules),
                )
                if check.verified:
                    result.kept.append(fix)
                    reference = last = run
                else:
                    result.dropped.append((fix, check.regressions))
            if last is not None:
                result.verification = compare_runs(
                    before,
                    last,
                    command=command,
                    fixes=result.kept,
                    tolerance=tolerance,
                    allows=allowances(result.kept, rules),
                )
        if result.verification is not None:
            result.verification.errors = list(result.errors)
            result.verification.calls = calls
        if not result.kept:
            return result
        changed = [
            f.file
            for f in result.kept
            if sha256_bytes(resolve(f.file, root).read_bytes()) != sha256_bytes(resolve(f.file, snapshot).read_bytes())
        ]
        if changed:
            raise UserError(f"{changed[0]}: changed while the fixes were being verified; not changed")
        result.rewrites = apply_fixes(root, result.kept, rules, write=write, profile=profile)
    return result
