"""`recompile-fix fix`: fix a program to a fixed point (profile, plan, verify, keep, profile
again), then write the kept fixes or print them as a diff."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from recompile_fix.errors import UserError

if TYPE_CHECKING:  # the command imports what it needs when it runs (a fast `--help`)
    from recompile_fix.config import Config
    from recompile_fix.verify.fixpoint import FixPoint

__all__ = ["fix"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also try fixes marked unsafe.")
@click.option(
    "--rounds",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="At most this many rounds of profile, plan, verify.",
)
@click.option("--diff", "show_diff", is_flag=True, help="Print the verified fixes as a diff; write nothing.")
@click.option(
    "--backend",
    default=None,
    metavar="NAME",
    help="Compile with this backend in every run (e.g. eager: same guards, faster) [default: the program's own].",
)
@click.option(
    "--profile",
    "profile_file",
    default=None,
    metavar="FILE",
    help="Where to write the Profile of the fixed program [default: .recompile-fix/profile.json].",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def fix(
    unsafe_fixes: bool | None,
    rounds: int,
    show_diff: bool,
    backend: str | None,
    profile_file: str | None,
    command: tuple[str, ...],
) -> None:
    """Fix COMMAND's program to a fixed point: profile, plan, verify, keep, profile again.

    \b
    recompile-fix fix -- python train.py
    recompile-fix fix --diff --backend eager -- python train.py
    Each round runs the fixes not tried yet on a copy (all together, else one at a time) and
    keeps those that make nothing worse, until nothing new is found or --rounds ran; then your
    files get the kept fixes (or --diff prints them). Exit code: 0 done, 1 stopped at --rounds
    with fixes left (or --diff with fixes to apply), 2 error.
    """
    from recompile_fix.config import load_config
    from recompile_fix.pipeline.fix import diff_text
    from recompile_fix.progress import Progress
    from recompile_fix.rules import ALL_RULES
    from recompile_fix.verify.fixpoint import fix_to_fixed_point
    from recompile_fix.verify.render import render_fix

    if not command:
        raise UserError("no command given: use `recompile-fix fix -- python train.py ...`")
    config = load_config()
    unsafe = config.unsafe_fixes if unsafe_fixes is None else unsafe_fixes
    result = fix_to_fixed_point(
        list(command),
        ALL_RULES,
        backend=backend,
        unsafe_fixes=unsafe,
        rounds=rounds,
        write=not show_diff,
        apply_options={"config": config},
        progress=Progress(),
    )
    if show_diff:
        click.echo(diff_text(result.rewrites), nl=False)
        click.echo(render_fix(result), nl=False, err=True)
    else:
        click.echo(render_fix(result), nl=False)
    for error in result.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    click.echo(_summary(result, command, show_diff, profile_file, config), err=True)
    if not result.converged or (show_diff and result.rewrites):
        sys.exit(1)


def _summary(
    result: FixPoint, command: tuple[str, ...], show_diff: bool, profile_file: str | None, config: Config
) -> str:
    """The closing line; without --diff, the fixed program's Profile is written first."""
    from recompile_fix.profile.model import save_profile

    files = len(result.rewrites)
    verb = "Would fix" if show_diff else "Fixed"
    summary = f"{verb} {len(result.kept)} verified finding(s) in {files} file(s)"
    if result.dropped:
        summary += f"; dropped {len(result.dropped)} (why: above)"
    summary += f" ({result.runs} runs of `{' '.join(command)}`)"
    if result.verification is not None:
        v = result.verification
        summary += f"; compiles {v.total('compiles', 'before')} -> {v.total('compiles', 'after')}"
    if not show_diff and result.profile is not None:
        written = save_profile(result.profile, profile_file or config.profile)
        summary += f"; wrote the fixed program's Profile to {written}"
    return summary + "."
