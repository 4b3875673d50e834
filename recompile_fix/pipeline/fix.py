"""The fix pipeline: the one path from a Profile to written files, which every surface calls
(`apply` and the pre-commit hooks that run it, `apply --verify`, `verify`, the language server).

    Profile + configuration --find--> Findings --select_fixes--> fixes
        --rewrite_files--> one FileRewrite per file --write_rewrites--> files (or diff_text)

Each stage in its own module, all imported from here by the surfaces:

* ``pipeline.find``: ``find`` (the Findings, from the Profile and the source, arbitrated,
  filtered by configuration and suppression comments, staleness reported; ``settle``: none whose
  fix the code already holds).
* ``pipeline.write``: ``select_fixes`` (safe ones, and unsafe ones when asked), ``rewrite_files``
  (each file's fixes as one rewrite) and ``write_rewrites`` (atomic writes, each remembered in the
  Profile's ``applied``, so a second apply changes nothing), or ``diff_text``.
* here: ``run_apply``, the stages in order under the project's lock.

The `fix` command's profile, verify and keep loop calls ``run_apply`` round after round
(``verify.fixpoint``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from recompile_fix.config import Config
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.find import (
    ApplyResult,
    find,
    finding_order,
    merge_findings,
    settle,
    settle_in,
    stale_message,
)
from recompile_fix.pipeline.lock import project_lock
from recompile_fix.pipeline.paths import real_file
from recompile_fix.pipeline.write import (
    FindingFix,
    clean_stale_temps,
    diff_text,
    finding_fixes,
    is_selected,
    rewrite_files,
    select_fixes,
    write_rewrites,
)
from recompile_fix.profile.model import Profile

# The stages live in pipeline.find and pipeline.write; every surface imports them from here.
__all__ = [
    "ApplyResult",
    "FindingFix",
    "clean_stale_temps",
    "diff_text",
    "find",
    "finding_fixes",
    "finding_order",
    "is_selected",
    "merge_findings",
    "rewrite_files",
    "run_apply",
    "select_fixes",
    "settle",
    "settle_in",
    "write_rewrites",
]


def run_apply(
    paths: list[str],
    profile: Profile | None,
    rules: tuple[Rule, ...],
    *,
    root: str | None = None,
    unsafe_fixes: bool = False,
    write: bool = True,
    config: Config | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
) -> ApplyResult:
    """The whole pipeline: find, select, rewrite, and write unless asked not to."""
    root_dir = Path(root or os.getcwd()).resolve()
    config = config or Config(root=root_dir)
    # A writing run holds the project's lock from reading the files to writing them.
    with project_lock(root_dir) if write else contextlib.nullcontext():
        result = find(paths, profile, rules, root=root_dir, config=config, jobs=jobs, use_cache=use_cache)
        rewrites, failed = rewrite_files(
            root_dir,
            select_fixes(result.findings, unsafe_fixes=unsafe_fixes),
            rules,
            result.planned_from,
            result.parsed,
            memo=result.memo,
        )
        skipped = [
            (r.path, f"{r.path}:{finding.location.line}: {finding.rule} not applied: {why}")
            for r in rewrites
            for finding, why in r.skipped
        ]
        changed = {r.path for r in rewrites if r.changed}
        stale = [(path, stale_message(path, what, path in changed)) for path, what in result.stale.items()]
        result.rewrites = [r for r in rewrites if r.changed]
        if write:
            # What a run killed before its rename left beside the files this run read.
            clean_stale_temps({real_file(path, root_dir).parent for path in result.planned_from})
            unwritten = write_rewrites(root_dir, result.rewrites, profile)
            failed.extend((r.path, why) for r, why in unwritten)
            result.rewrites = [r for r in result.rewrites if all(r is not u for u, _ in unwritten)]
    result.errors.extend(message for _, message in sorted(stale + failed + skipped, key=lambda item: item[0]))
    return result
