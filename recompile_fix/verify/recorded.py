"""`verify` after `apply`: nothing is pending, so the program runs once, on the tree as it is
(the fixes already in it), and is compared with the run the Profile recorded before them.

What the recorded run can be compared on: per frame, compiles, recompiles, recompile-limit hits
and graph breaks (judged as `verify` judges a fixed copy: more is worse), the exit code (a run
that fails where the recorded one did not is worse) and compile seconds (shown, not judged: a
busy machine stretches them). A Profile keeps no outputs of compiled calls, so outputs are not
compared; the verdict says so, and that `verify` before `apply` compares them."""

from __future__ import annotations

import os
from pathlib import Path

from recompile_fix.profile.compiled_outputs import DEFAULT_CALLS
from recompile_fix.profile.model import Profile
from recompile_fix.progress import Progress
from recompile_fix.verify.compare import Tolerance, Verification, compare_runs
from recompile_fix.verify.runs import Run, run_command
from recompile_fix.verify.tree import Checkout

__all__ = ["OUTPUTS_NOT_COMPARED", "records_a_run", "verify_or_recorded", "verify_recorded"]

LOG = ".recompile-fix/verify/after-apply.log"
OUTPUTS_NOT_COMPARED = (
    "outputs not compared: the Profile keeps no outputs of compiled calls "
    "(`recompile-fix verify` before `apply` runs both sides and compares them)"
)


def records_a_run(profile: Profile) -> bool:
    """Does the Profile hold a run to compare with (not a static plan's empty Profile)?"""
    return bool(profile.frames) or profile.exit_code is not None


def verify_recorded(
    command: list[str],
    profile: Profile,
    *,
    root: str | os.PathLike | None = None,
    backend: str | None = None,
    tolerance: Tolerance | None = None,
    fail_on_recompile: bool = False,
    calls: int = DEFAULT_CALLS,
    progress: Progress | None = None,
) -> Verification:
    """Run ``command`` once on the tree as it is, from ``root`` (default: here), and compare
    it with the run ``profile`` recorded."""
    user = Checkout.of(root or os.getcwd(), profile)
    recorded = Run(
        profile=profile,
        exit_code=profile.exit_code if profile.exit_code is not None else 0,
        outputs={},
        root=user.cwd,
        log=Path(user.cwd, ".recompile-fix", "profile.json"),
    )
    now = run_command(
        command,
        at=user,
        backend=backend,
        log=user.cwd / LOG,
        calls=calls,
        fail_on_recompile=fail_on_recompile,
        progress=progress,
        label="run 1/1: your tree as it is, against the run the Profile recorded",
    )
    now.outputs = {}  # the recorded side has none: nothing to pair them with
    v = compare_runs(recorded, now, command=command, fixes=[], tolerance=tolerance or Tolerance())
    v.notes = [n for n in v.notes if "outputs were not compared" not in n]
    v.notes.append(OUTPUTS_NOT_COMPARED)
    v.against_recorded = True
    v.calls = calls
    v.fail_on_recompile = fail_on_recompile
    return v


def recorded_header(v: Verification) -> list[str]:
    """The first lines of `verify`'s text when it compared with the recorded run."""
    return [
        f"No safe fix is pending (none was found, or they are in your tree; `--unsafe-fixes` tries the "
        f"others): ran `{' '.join(v.command)}` once and compared it with the run the Profile recorded.",
        "Compared per frame: compiles, recompiles, recompile-limit hits, graph breaks, and the exit code; "
        "compile seconds shown, not judged. Outputs were not compared (the Profile keeps none).",
        "",
    ]


def recorded_verdict(v: Verification) -> str:
    return (
        f"Verified against the recorded run: compiles {v.total('compiles', 'before')} -> "
        f"{v.total('compiles', 'after')}, recompiles {v.total('recompiles', 'before')} -> "
        f"{v.total('recompiles', 'after')}, recompile-limit hits {v.total('limit_hits', 'before')} -> "
        f"{v.total('limit_hits', 'after')}; outputs not compared."
    )


def verify_or_recorded(command: list[str], profile: Profile, rules, **options) -> Verification:
    """`recompile-fix verify`: the pending fixes on a copy (``prove.verify``); with none pending
    and a recorded run in the Profile, the tree as it is against that run (``verify_recorded``)."""
    from recompile_fix.verify.prove import verify

    v = verify(command, profile, rules, **options)
    if v.ran or v.errors or not records_a_run(profile):
        return v
    keep = ("root", "backend", "tolerance", "fail_on_recompile", "calls", "progress")
    return verify_recorded(command, profile, **{k: options[k] for k in keep if k in options})
