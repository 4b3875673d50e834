"""`recompile-fix verify`: run the command on the user's tree and on a fixed copy, and compare
compiles and outputs per frame (text, JSON, or one HTML page with the charts)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from recompile_fix.errors import UserError

if TYPE_CHECKING:  # the command imports what it needs when it runs (a fast `--help`)
    from recompile_fix.findings.rule import Rule
    from recompile_fix.profile.model import Profile
    from recompile_fix.verify.compare import Tolerance, Verification

__all__ = ["verify"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--profile",
    "profile_file",
    default=None,
    metavar="FILE",
    help="The Profile to fix from [default: .recompile-fix/profile.json].",
)
@click.option(
    "--backend",
    default=None,
    metavar="NAME",
    help="Compile with this backend in both runs [default: the one the Profile was recorded with].",
)
@click.option("--unsafe-fixes", is_flag=True, help="Also verify fixes marked unsafe.")
@click.option("--exact", is_flag=True, help="Outputs must be equal bit for bit.")
@click.option("--rtol", type=float, default=None, help="Relative tolerance for outputs (with --atol; other is 0).")
@click.option("--atol", type=float, default=None, help="Absolute tolerance for outputs.")
@click.option(
    "--calls",
    type=click.IntRange(1),
    default=8,
    show_default=True,
    help="How many first calls of each compiled callable to compare.",
)
@click.option(
    "--fail-on-recompile",
    is_flag=True,
    help="After warm-up (each compiled callable's first call), any compile fails the fixed run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.option(
    "--html",
    "html_file",
    default=None,
    metavar="FILE",
    help="Also write a self-contained page: before/after bar charts, and per frame its reasons, call "
    "sites, graph breaks, the fixes' diffs and its own before/after bars.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def verify(
    profile_file: str | None,
    backend: str | None,
    unsafe_fixes: bool,
    exact: bool,
    rtol: float | None,
    atol: float | None,
    calls: int,
    fail_on_recompile: bool,
    as_json: bool,
    html_file: str | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND on your tree and on a fixed copy; compare compiles and outputs per frame.

    \b
    recompile-fix verify -- python train.py --epochs 1
    recompile-fix verify --html verify.html --exact -- python train.py
    Exit code: 0 verified, 1 a fix makes things worse, 2 error.
    """
    from recompile_fix.config import enter_project, load_config
    from recompile_fix.profile.model import Profile
    from recompile_fix.rules import ALL_RULES
    from recompile_fix.verify.compare import Tolerance

    if exact and (rtol is not None or atol is not None):
        raise UserError("--exact and --rtol/--atol exclude each other")
    if profile_file is None and not command:  # the Profile's command runs where it was profiled
        enter_project()
    config = load_config()
    config.check_selectors([rule.id for rule in ALL_RULES])
    loaded = Profile.load(profile_file or config.profile)
    sys.exit(
        _verify(
            command=list(command),
            profile=loaded,
            rules=ALL_RULES,
            backend=backend,
            unsafe_fixes=unsafe_fixes or config.unsafe_fixes,
            as_json=as_json,
            tolerance=Tolerance(exact=exact, rtol=rtol, atol=atol),
            html_file=html_file,
            fail_on_recompile=fail_on_recompile,
            calls=calls,
            apply_options={"config": config},
        )
    )


def _verify(
    *,
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    backend: str | None,
    unsafe_fixes: bool,
    as_json: bool,
    tolerance: Tolerance,
    html_file: str | None,
    fail_on_recompile: bool,
    calls: int,
    apply_options: dict[str, Any] | None = None,
) -> int:
    """`recompile-fix verify`; returns the exit code (0 verified, 1 worse, 2 error)."""
    from recompile_fix.progress import Progress
    from recompile_fix.verify.recorded import verify_or_recorded
    from recompile_fix.verify.render import render_text

    command = list(command) or list(profile.command)
    if not command:
        raise UserError("no command to run: use `recompile-fix verify -- python train.py ...`")
    v = verify_or_recorded(
        command,
        profile,
        rules,
        backend=backend if backend is not None else profile.backend,
        unsafe_fixes=unsafe_fixes,
        tolerance=tolerance,
        fail_on_recompile=fail_on_recompile,
        calls=calls,
        apply_options=apply_options,
        progress=Progress(),
    )
    if as_json:
        click.echo(json.dumps(v.to_json(), indent=1))
    else:
        click.echo(render_text(v), nl=False)
    if html_file and v.ran:
        _write_page(html_file, profile, rules, v)
    for error in v.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    if not v.verified:
        return 1
    return 2 if v.errors else 0


def _write_page(html_file: str, profile: Profile, rules: tuple[Rule, ...], v: Verification) -> None:
    """`verify --html`: the report's page with the before/after charts."""
    from recompile_fix.analysis.compile_calls import static_compile_site
    from recompile_fix.analysis.project import Project
    from recompile_fix.findings.accounting import account
    from recompile_fix.html_report import render_page
    from recompile_fix.pipeline.fix import finding_fixes
    from recompile_fix.verify.chart import verification_body

    project = Project(".", expected_hashes=profile.sources, interpreter=profile.interpreter)
    accounting = account(profile, v.fixes, deliberate_static=static_compile_site(profile, project))

    page = render_page(
        profile,
        v.fixes,
        finding_fixes(Path.cwd(), v.fixes, rules),
        root=".",
        verification=v,
        verification_body=verification_body(v, heading="h2"),
        accounting=accounting,
    )
    Path(html_file).write_text(page, encoding="utf-8")
    click.echo(f"recompile-fix: wrote {html_file}", err=True)
