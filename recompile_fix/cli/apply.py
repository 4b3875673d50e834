"""`recompile-fix apply`: edit the files so the recompiles in the Profile stop (as ruff's
`--fix`: --diff, --check, --select, --output-format), and `apply --verify`, which runs the
Profile's command to keep only the fixes that make nothing worse."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from recompile_fix.errors import UserError

if TYPE_CHECKING:  # the command imports what it needs when it runs (a fast `--help`)
    from recompile_fix.config import Config
    from recompile_fix.findings.rule import Rule
    from recompile_fix.pipeline.fix import ApplyResult
    from recompile_fix.profile.model import Profile

__all__ = ["apply"]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--profile",
    "profile_file",
    default=None,
    metavar="FILE",
    help="The Profile to fix from [default: .recompile-fix/profile.json; without one, "
    "only the rules that need no Profile run].",
)
@click.option(
    "--diff", "show_diff", is_flag=True, help="Print a unified diff; write nothing; exit 1 when fixes are pending."
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when fixes are pending.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when fixes are pending (--check, --diff).")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes marked unsafe.")
@click.option("--select", default=None, metavar="IDS", help="Comma-separated rule ids or prefixes to run.")
@click.option("--ignore", default=None, metavar="IDS", help="Comma-separated rule ids or prefixes to skip.")
@click.option(
    "--output-format",
    type=click.Choice(["concise", "full", "text", "json", "sarif", "github"]),
    default=None,
    help="How findings are printed: concise (one line each), full (with notes; text is its old name), "
    "json, sarif, github [default: concise on a terminal, full otherwise].",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    metavar="FILE",
    help="A pyproject.toml to read [tool.recompile-fix] from [default: the nearest one].",
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=None, help="Processes for the static scan [default: cores]."
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the static-scan cache.")
@click.option(
    "--verify",
    "verify_fixes",
    is_flag=True,
    help="Run the Profile's command before and after; apply only the fixes that make nothing worse.",
)
def apply(**options: Any) -> None:
    """Edit the files under PATHS (default: .) so the recompiles in the Profile stop.

    Exit code: 0 nothing pending (or all fixed), 1 fixes pending (--check, --diff), 2 error.
    """
    import contextlib
    import os

    from recompile_fix.cli.deferred_imports import defer_heavy

    defer_heavy()  # a warm run answers from the caches: libcst loads only if a file is parsed
    from recompile_fix.config import enter_project
    from recompile_fix.pipeline.lock import project_lock
    from recompile_fix.pipeline.paths import skipped_sources

    paths = list(options["paths"]) or ["."]  # as ruff: no PATHS is the current folder
    for skipped in skipped_sources(paths):  # one line each, as ruff; the exit status is the others'
        click.echo(f"recompile-fix: warning: {skipped}: not a Python file; skipped", err=True)
    options["paths"] = [p for p in paths if p not in skipped_sources([p])]
    if options["output_format"] is None:  # one line a finding where a person reads it, as ruff
        options["output_format"] = "concise" if sys.stdout.isatty() else "full"
    elif options["output_format"] == "text":
        options["output_format"] = "full"
    if options["profile_file"] is None:  # the Profile's project, found upward from here
        options["paths"] = enter_project(options["paths"])
    write = not (options["show_diff"] or options["check"])
    # One writing run at a time: from reading the Profile to recording what was written in it.
    with project_lock(os.getcwd()) if write else contextlib.nullcontext():
        _apply(**options)


def _apply(
    paths: list[str],
    profile_file: str | None,
    show_diff: bool,
    check: bool,
    unsafe_fixes: bool | None,
    select: str | None,
    ignore: str | None,
    output_format: str,
    config_file: str | None,
    jobs: int | None,
    no_cache: bool,
    verify_fixes: bool,
    exit_zero: bool,
) -> None:
    from recompile_fix.pipeline.fix import run_apply
    from recompile_fix.rules import ALL_RULES

    config = _apply_config(config_file, select, ignore, unsafe_fixes)
    profile_path = profile_file or config.profile
    loaded = _load_profile(profile_file, profile_path, announce=output_format in ("concise", "full"))
    write = not (show_diff or check)
    if verify_fixes:
        sys.exit(
            _apply_verified(
                paths=list(paths),
                profile=loaded,
                profile_path=profile_path,
                rules=ALL_RULES,
                unsafe_fixes=config.unsafe_fixes,
                write=write,
                show_diff=show_diff,
                check=check and not exit_zero,
                diff_exit=show_diff and not exit_zero,
                apply_options={"config": config, "jobs": jobs, "use_cache": not no_cache},
            )
        )
    result = run_apply(
        list(paths),
        loaded,
        ALL_RULES,
        unsafe_fixes=config.unsafe_fixes,
        write=False,  # written below, once the output (each fix's edits on the files as they are) is made
        config=config,
        jobs=jobs,
        use_cache=not no_cache,
    )
    shown = _shown(result, show_diff, output_format, config.unsafe_fixes)
    if result.memo is not None:
        result.memo.save()
    if write:
        _write(result, loaded)
    click.echo(shown, nl=False)
    for error in result.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    if write and result.rewrites and loaded is not None:
        _remember_applied(result, loaded, profile_path)
    if output_format in ("concise", "full") or show_diff:
        _print_summary(result, loaded, paths, write=write, unsafe_fixes=config.unsafe_fixes)
    if result.errors:
        sys.exit(2)
    if (check or show_diff) and result.pending and not exit_zero:
        sys.exit(1)  # as ruff: --check and --diff fail while fixes are pending


def _apply_config(config_file: str | None, select: str | None, ignore: str | None, unsafe_fixes: bool | None) -> Config:
    """The configuration file's settings, with the command line's over them."""
    from recompile_fix.config import check_selectors, load_config, split_ids
    from recompile_fix.rules import ALL_RULES

    config = load_config(explicit=config_file)
    rule_ids = [rule.id for rule in ALL_RULES]
    config.check_selectors(rule_ids)
    if select is not None:
        config.select = split_ids(select) or []
        check_selectors(config.select, rule_ids, "--select")
    if ignore is not None:
        ignored = split_ids(ignore) or []
        check_selectors(ignored, rule_ids, "--ignore")
        config.ignore = config.ignore + ignored
    if unsafe_fixes is not None:
        config.unsafe_fixes = unsafe_fixes
    return config


def _load_profile(profile_file: str | None, profile_path: str, *, announce: bool) -> Profile | None:
    """The Profile to fix from; None (static mode) where none was given and none is at the
    default path (``announce``: say so, where a person reads the output)."""
    import os

    from recompile_fix.profile.model import Profile

    if profile_file or os.path.exists(profile_path):
        return Profile.load(profile_path)
    if announce:
        click.echo(
            f"recompile-fix: no Profile at {profile_path}: static mode, only the rules that need "
            "no Profile run (lower confidence)",
            err=True,
        )
    return None


def _shown(result: ApplyResult, show_diff: bool, output_format: str, unsafe_fixes: bool) -> str:
    """What `apply` prints: the diff, or the findings in ``output_format``."""
    from recompile_fix.findings.finding import stands_in_for
    from recompile_fix.output import render, terminal_width
    from recompile_fix.pipeline.fix import diff_text, is_selected
    from recompile_fix.rules import ALL_RULES

    if show_diff:
        return diff_text(result.rewrites)
    # A fallback is listed while its preferred fix is not made (it would be, in its place).
    chosen = [f for f in result.findings if is_selected(f, unsafe_fixes=unsafe_fixes)]
    listed = [f for f in result.findings if not (f.fallback and any(stands_in_for(f, c) for c in chosen))]
    return render(
        listed,
        output_format,
        unsafe_fixes=unsafe_fixes,
        rules=ALL_RULES,
        width=terminal_width(),
        memo=result.memo,
    )


def _write(result: ApplyResult, loaded: Profile | None) -> None:
    """Write the rewrites; one that cannot be written is an error of its own (and no rewrite)."""
    from recompile_fix.pipeline.fix import write_rewrites

    unwritten = write_rewrites(Path.cwd().resolve(), result.rewrites, loaded)
    result.errors.extend(why for _, why in unwritten)  # one line each; the others are written
    result.rewrites = [r for r in result.rewrites if all(r is not u for u, _ in unwritten)]


def _remember_applied(result: ApplyResult, loaded: Profile, profile_path: str) -> None:
    try:
        loaded.dump(profile_path)  # remember what was applied: a second apply is a no-op
    except UserError as exc:
        result.errors.append(f"{exc}; the files fixed will read as changed since profiling")
        click.echo(f"recompile-fix: error: {result.errors[-1]}", err=True)


def _print_summary(
    result: ApplyResult, loaded: Profile | None, paths: list[str], *, write: bool, unsafe_fixes: bool
) -> None:
    """The closing lines on stderr: what was fixed, what was found outside PATHS, and where the
    Profile's recompiles end."""
    from recompile_fix.pipeline.fix import select_fixes

    fixed = len(result.pending)
    files = len(result.rewrites)
    # What --unsafe-fixes would make beyond the safe ones (a fallback beside its preferred fix: not).
    unsafe_left = (
        0
        if unsafe_fixes
        else len(select_fixes(result.findings, unsafe_fixes=True))
        - len(select_fixes(result.findings, unsafe_fixes=False))
    )
    summary = f"{'Fixed' if write else 'Would fix'} {fixed} finding(s) in {files} file(s)."
    if result.already_applied:
        summary += f" {len(result.already_applied)} file(s) already fixed."
    if unsafe_left:
        summary += f" {unsafe_left} more with --unsafe-fixes."
    if loaded is not None and fixed and write and loaded.frames:
        # A fix can uncover what it removed hid (torch names only the first failing guard), and
        # some recompiles are legitimate: `fix` profiles again and says which stay, and why.
        summary += " Profile again to see what the fixes leave, or run `recompile-fix fix -- <command>` to the end."
    click.echo(summary, err=True)
    if result.outside:  # context (torch's own files, other folders): never an error
        outside = sorted({f.file for f in result.outside})
        named = ", ".join(outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
        click.echo(f"{len(result.outside)} more finding(s) outside {' '.join(paths)} (not changed): {named}.", err=True)
    if loaded is not None:
        click.echo(_accounting_line(result.profile or loaded, result), err=True)


def _accounting_line(loaded: Profile, result: ApplyResult) -> str:
    """Where the Profile's recompiles end (findings.accounting), for the end of `apply`."""
    from recompile_fix.analysis.compile_calls import static_compile_site
    from recompile_fix.analysis.project import Project
    from recompile_fix.findings.accounting import account

    if result.already_applied:
        return (
            f"Recompiles: the Profile predates the fixes in {len(result.already_applied)} file(s); "
            "profile again to see what remains."
        )
    project = Project(".", expected_hashes=loaded.sources, interpreter=loaded.interpreter)
    # Counted as `report` counts them (an unsafe fix is a proposed fix, said to need the flag).
    accounting = account(
        loaded, result.findings + result.outside, deliberate_static=static_compile_site(loaded, project)
    )
    return f"Recompiles in the Profile: {accounting.summary()}."


# -- apply --verify ---------------------------------------------------------------------------


def _apply_verified(
    *,
    paths: list[str],
    profile: Profile | None,
    profile_path: str,
    rules: tuple[Rule, ...],
    unsafe_fixes: bool,
    write: bool,
    show_diff: bool,
    check: bool,
    diff_exit: bool = False,
    apply_options: dict[str, Any] | None = None,
) -> int:
    """`recompile-fix apply --verify`; returns the exit code (0 all verified and applied, 1 a fix
    was dropped or, with --check, verified fixes are pending, 2 error)."""
    from recompile_fix.pipeline.fix import diff_text
    from recompile_fix.progress import Progress
    from recompile_fix.verify.judge import NO_OP
    from recompile_fix.verify.prove import apply_verified
    from recompile_fix.verify.render import frame_table, outputs_verdict

    if profile is None:
        raise UserError("apply --verify needs a Profile: it runs the command the Profile recorded")
    if not profile.command:
        raise UserError("the Profile records no command to run; use `recompile-fix verify -- CMD`")
    result = apply_verified(
        list(profile.command),
        profile,
        rules,
        paths=paths,
        backend=profile.backend,
        unsafe_fixes=unsafe_fixes,
        write=write,
        apply_options=apply_options,
        progress=Progress(),
    )
    if show_diff:
        click.echo(diff_text(result.rewrites), nl=False)
    else:
        v = result.verification
        verdict = outputs_verdict(v) if v is not None else "outputs equal"
        for finding in result.kept:
            # Outputs within a tolerance only: the fix keeps its `[unsafe fix]` (a `[*]` promises the bits).
            rounded = v is not None and v.rounded and finding.unproven
            click.echo(finding.describe(unsafe_fixes=not rounded) + f"\n    verified: makes nothing worse, {verdict}")
        for finding, why in result.dropped:
            click.echo(finding.describe(unsafe_fixes=True))
            if why and why[0].startswith(NO_OP):
                click.echo(f"    dropped: it {why[0]}")
                continue
            click.echo("    dropped: verification shows it makes things worse:")
            click.echo("\n".join(f"      - {w}" for w in why))
        if result.verification is not None:
            click.echo("")
            click.echo("\n".join(frame_table(result.verification)))
    for error in result.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    files = len(result.rewrites)
    verb = "Fixed" if write else "Would fix"
    summary = f"{verb} {len(result.kept)} verified finding(s) in {files} file(s)"
    if result.dropped:
        summary += f"; dropped {len(result.dropped)} (why: above)"
    summary += f" ({result.runs} runs of `{' '.join(profile.command)}`)." if result.runs else "."
    click.echo(summary, err=True)
    if write and result.rewrites:
        profile.dump(profile_path)  # remember what was applied: a second apply is a no-op
    if result.errors:
        return 2
    if result.dropped or ((check or diff_exit) and result.kept):
        return 1
    return 0
