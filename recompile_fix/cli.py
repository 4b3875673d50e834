"""The `recompile-fix` command line. Exit codes as ruff has them: 0 clean, 1 findings left
(with --check), 2 error."""

from __future__ import annotations

import json
import sys

import click

from recompile_fix.errors import UserError


def _fail(message: str) -> None:
    click.echo(f"recompile-fix: error: {message}", err=True)
    sys.exit(2)


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as exc:
            _fail(str(exc))


@click.group(cls=_Group)
@click.version_option(package_name="recompile-fix")
def main() -> None:
    """Find the frames torch.compile recompiles, and edit the source so it stops."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", default=None, metavar="FILE",
              help="Where to write the Profile [default: .recompile-fix/profile.json].")
@click.option("--backend", default=None, metavar="NAME",
              help="Compile with this backend instead of the program's own (e.g. eager: same guards, faster).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def profile(output, backend, command) -> None:
    """Run COMMAND under the recorder and write a Profile.

    \b
    recompile-fix profile -- python train.py --epochs 1
    recompile-fix profile -- python -m mypkg.train
    recompile-fix profile -- train.py
    """
    from recompile_fix.profile_run import DEFAULT_PROFILE, run_profiled

    output = output or DEFAULT_PROFILE
    result, exit_code = run_profiled(list(command), backend=backend)
    result.dump(output)
    frames = len(result.frames)
    if frames == 0:
        click.echo(f"recompile-fix: the program compiled nothing under torch.compile; "
                   f"wrote an empty Profile to {output}", err=True)
    else:
        recompiles = sum(f.recompiles for f in result.frames)
        limit_hits = sum(f.limit_hits for f in result.frames)
        click.echo(f"recompile-fix: wrote {output}: {frames} frames, {result.total_compiles} compiles, "
                   f"{recompiles} recompiles, {limit_hits} limit hits"
                   + (f" (the program exited with {exit_code})" if exit_code else ""), err=True)
    sys.exit(exit_code)


@main.command()
@click.argument("profile_file", required=False, metavar="[FILE]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def report(profile_file, as_json) -> None:
    """Show what a Profile recorded: per frame, compiles, recompiles and why."""
    from recompile_fix.profile import Profile
    from recompile_fix.profile_run import DEFAULT_PROFILE
    from recompile_fix.report import render_json, render_text

    loaded = Profile.load(profile_file or DEFAULT_PROFILE)
    if as_json:
        click.echo(json.dumps(render_json(loaded), indent=1))
    else:
        click.echo(render_text(loaded), nl=False)
