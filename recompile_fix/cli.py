"""The `recompile-fix` command line. Exit codes as ruff has them: 0 clean, 1 findings left
(with --check), 2 error."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from recompile_fix.errors import Interrupted, UserError

__all__ = ["apply", "fix", "lsp", "main", "profile", "report", "rules", "verify"]

if TYPE_CHECKING:  # the commands import what they need when they run (a fast `--help`)
    from recompile_fix.findings.rule import Rule
    from recompile_fix.profile.model import Profile
    from recompile_fix.verify.compare import Tolerance


def _fail(message: str) -> None:
    click.echo(f"recompile-fix: error: {message}", err=True)
    sys.exit(2)


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as exc:
            _fail(str(exc))

    def main(self, *args, **kwargs):
        # SIGTERM unwinds like Ctrl-C (temp directories removed, locks released), then exits
        # with 143; while a program runs, profile/run.py passes both on to it instead.
        previous = _raise_on_sigterm()
        # Usage errors in one line, like every other error (click prints three).
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "recompile-fix"
            _fail(f"{exc.format_message()} (see `{command} --help`)")
        except Interrupted as exc:
            _interrupted(exc)
        except click.exceptions.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                _interrupted(Interrupted(signal.SIGINT))
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            _fail(exc.format_message())
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        sys.exit(code if isinstance(code, int) else 0)  # ctx.exit(n) comes back as n here


def _raise_on_sigterm():
    def handler(signum, _frame):
        raise Interrupted(signum)

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a test driving main() from a thread)
        return None


def _interrupted(exc: Interrupted) -> None:
    name = signal.Signals(exc.signum).name
    what = "aborted: no Profile written" if exc.aborted else "stopped"
    click.echo(f"recompile-fix: interrupted ({name}); {what}", err=True)
    sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recompile-fix")
def main() -> None:
    """Find the frames torch.compile recompiles, and edit the source so it stops."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "-o",
    "--output",
    default=None,
    metavar="FILE",
    help="Where to write the Profile [default: .recompile-fix/profile.json].",
)
@click.option(
    "--backend",
    default=None,
    metavar="NAME",
    help="Compile with this backend instead of the program's own (e.g. eager: same guards, faster).",
)
@click.option(
    "--from-trace",
    "trace_dir",
    default=None,
    metavar="DIR",
    help="Read a TORCH_TRACE directory (any number of ranks) instead of running a command.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def profile(output, backend, trace_dir, command) -> None:
    """Run COMMAND under the recorder and write a Profile.

    \b
    recompile-fix profile -- python train.py --epochs 1
    recompile-fix profile -- python -m mypkg.train
    recompile-fix profile -- torchrun --nproc-per-node 2 train.py
    recompile-fix profile --from-trace /tmp/trace   (TORCH_TRACE=/tmp/trace python train.py)
    """
    from recompile_fix.config import load_config
    from recompile_fix.profile.model import save_profile
    from recompile_fix.profile.run import recording_summary, run_profiled
    from recompile_fix.progress import Progress

    output = output or load_config().profile
    if trace_dir is not None:
        from recompile_fix.profile.trace_reader import profile_from_trace

        if command or backend:
            raise UserError("--from-trace reads a finished run: give no command and no --backend")
        result, exit_code = profile_from_trace(trace_dir), 0
        if result.frames and result.torch_version is None:
            click.echo(
                "recompile-fix: warning: the trace does not say which torch wrote it (torch < 2.10 names it "
                "nowhere, and its torch is not installed here): fixes that depend on the release are not made",
                err=True,
            )
    else:
        label = f"recompile-fix: profiling `{' '.join(command)}`" + (f" (backend {backend})" if backend else "")
        try:
            with Progress().run(label, live_output=True) as shown:
                result, exit_code = run_profiled(list(command), backend=backend)
                shown.finish(exit_code)
        except Interrupted as exc:
            if exc.partial is None:
                raise
            written = save_profile(exc.partial, output)  # what the program compiled before it was stopped
            name = signal.Signals(exc.signum).name
            click.echo(
                f"recompile-fix: interrupted ({name}): wrote the partial Profile to {written}: "
                f"{len(exc.partial.frames)} frames, {exc.partial.total_compiles} compiles",
                err=True,
            )
            sys.exit(exc.exit_code)
    written = save_profile(result, output)
    click.echo(_profile_summary(result, exit_code, str(written), output, recording_summary(result)), err=True)
    sys.exit(exit_code)


def _profile_summary(result: Profile, exit_code: int, written: str, wanted: str, recorded: str) -> str:
    ended = f" (the program exited with {exit_code})" if exit_code else ""
    if result.frames:
        recompiles = sum(f.recompiles for f in result.frames)
        limit_hits = sum(f.limit_hits for f in result.frames)
        return (
            f"recompile-fix: wrote {written}: {len(result.frames)} frames, {result.total_compiles} compiles, "
            f"{recompiles} recompiles, {limit_hits} limit hits ({recorded}){ended}"
        )
    what = "the program compiled nothing under torch.compile" + (f" and exited with {exit_code}" if exit_code else "")
    if written != wanted:
        return (
            f"recompile-fix: {what}; kept the Profile at {wanted} and wrote this run's beside it, "
            f"to {written} ({recorded})"
        )
    return f"recompile-fix: {what}; wrote an empty Profile to {written} ({recorded})"


@main.command()
@click.argument("profile_file", required=False, metavar="[FILE]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.option(
    "--html",
    "html_file",
    default=None,
    metavar="FILE",
    help="Also write one self-contained page (offline): frames by compile seconds, their call sites, "
    "reasons, graph breaks, each finding with its diff, and where every recompile ends.",
)
@click.option(
    "--output-format",
    type=click.Choice(["concise", "full", "text"]),
    default=None,
    help="How the fixes are listed: concise (one line each) or full (with notes; text is its old name) "
    "[default: concise on a terminal, full otherwise].",
)
def report(profile_file, as_json, html_file, output_format) -> None:
    """Show what a Profile recorded: per frame, compiles, recompiles and why."""
    import copy

    from recompile_fix.analysis.compile_calls import static_compile_site
    from recompile_fix.analysis.project import Project
    from recompile_fix.analysis.relocate import anchor
    from recompile_fix.config import enter_project, load_config
    from recompile_fix.findings.accounting import account
    from recompile_fix.output import terminal_width
    from recompile_fix.pipeline.fix import find, finding_order
    from recompile_fix.profile.model import Profile
    from recompile_fix.profile.validate import check_against_sources
    from recompile_fix.report import render_json, render_text
    from recompile_fix.rules import ALL_RULES

    if profile_file is None:  # the Profile's project, found upward from here
        enter_project()
    loaded = Profile.load(profile_file or load_config().profile)
    check_against_sources(loaded, lambda path: _read_or_none(path, loaded), ".")
    # As `apply` finds them: evidence in files edited since profiling where its code is now
    # (analysis.relocate); a frame whose code changed is shown as recorded, with no fix.
    anchored = anchor(loaded, Path.cwd())
    for note in anchored.notes:
        click.echo(f"recompile-fix: {note}", err=True)
    project = Project(".", expected_hashes=anchored.profile.sources, interpreter=loaded.interpreter)
    shown = anchored.profile
    if anchored.stale:
        shown = copy.copy(anchored.profile)
        shown.frames = anchored.profile.frames + anchored.stale
    # The Findings `apply` finds (one pipeline: the configuration, per-file-ignores, suppression
    # comments, staleness); fixes already in the code are not offered again, and the accounting,
    # of the Profile's recompiles, counts them as fixes.
    found = find(["."], loaded, ALL_RULES, root=Path.cwd().resolve(), config=load_config())
    findings = sorted([*found.findings, *found.outside], key=finding_order)
    planned = [*findings, *(f for f, _ in found.present)]
    accounting = account(shown, planned, deliberate_static=static_compile_site(anchored.profile, project))
    if as_json:
        click.echo(json.dumps(render_json(shown, findings, accounting=accounting), indent=1))
    else:
        concise = output_format == "concise" or (output_format is None and sys.stdout.isatty())
        click.echo(
            render_text(shown, findings=findings, accounting=accounting, width=terminal_width(), concise=concise),
            nl=False,
        )
    if html_file:
        from recompile_fix.html_report import render_page
        from recompile_fix.pipeline.fix import finding_fixes

        page = render_page(
            shown, findings, finding_fixes(Path.cwd(), findings, ALL_RULES), root=".", accounting=accounting
        )
        Path(html_file).write_text(page, encoding="utf-8")
        click.echo(f"recompile-fix: wrote {html_file}", err=True)


@main.command()
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
def apply(**options) -> None:
    """Edit the files under PATHS (default: .) so the recompiles in the Profile stop.

    Exit code: 0 nothing pending (or all fixed), 1 fixes pending (--check, --diff), 2 error.
    """
    import contextlib
    import os

    from recompile_fix.config import enter_project
    from recompile_fix.pipeline.lock import project_lock
    from recompile_fix.pipeline.scan import skipped_sources

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
    paths,
    profile_file,
    show_diff,
    check,
    unsafe_fixes,
    select,
    ignore,
    output_format,
    config_file,
    jobs,
    no_cache,
    verify_fixes,
    exit_zero,
) -> None:
    import os

    from recompile_fix.config import check_selectors, load_config, split_ids
    from recompile_fix.findings.finding import Safety
    from recompile_fix.output import render, terminal_width
    from recompile_fix.pipeline.fix import diff_text, run_apply, write_rewrites
    from recompile_fix.profile.model import Profile
    from recompile_fix.rules import ALL_RULES

    config = load_config(explicit=config_file)
    rule_ids = [rule.id for rule in ALL_RULES]
    config.check_selectors(rule_ids)
    if select is not None:
        config.select = split_ids(select)
        check_selectors(config.select, rule_ids, "--select")
    if ignore is not None:
        check_selectors(split_ids(ignore), rule_ids, "--ignore")
        config.ignore = config.ignore + split_ids(ignore)
    if unsafe_fixes is not None:
        config.unsafe_fixes = unsafe_fixes
    profile_path = profile_file or config.profile
    loaded = None
    if profile_file or os.path.exists(profile_path):
        loaded = Profile.load(profile_path)
    elif output_format in ("concise", "full"):
        click.echo(
            f"recompile-fix: no Profile at {profile_path}: static mode, only the rules that need "
            "no Profile run (lower confidence)",
            err=True,
        )
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
    if show_diff:
        shown = diff_text(result.rewrites)
    else:
        shown = render(
            result.findings,
            output_format,
            unsafe_fixes=config.unsafe_fixes,
            rules=ALL_RULES,
            width=terminal_width(),
            memo=result.memo,
        )
    if result.memo is not None:
        result.memo.save()
    if write:
        unwritten = write_rewrites(Path.cwd().resolve(), result.rewrites, loaded)
        result.errors.extend(why for _, why in unwritten)  # one line each; the others are written
        result.rewrites = [r for r in result.rewrites if all(r is not u for u, _ in unwritten)]
    click.echo(shown, nl=False)
    for error in result.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    fixed = len(result.pending)
    files = len(result.rewrites)
    unsafe_left = 0 if config.unsafe_fixes else sum(1 for f in result.findings if f.safety is Safety.UNSAFE)
    if write:
        if result.rewrites and loaded is not None:
            try:
                loaded.dump(profile_path)  # remember what was applied: a second apply is a no-op
            except UserError as exc:
                result.errors.append(f"{exc}; the files fixed will read as changed since profiling")
                click.echo(f"recompile-fix: error: {result.errors[-1]}", err=True)
        summary = f"Fixed {fixed} finding(s) in {files} file(s)."
    else:
        summary = f"Would fix {fixed} finding(s) in {files} file(s)."
    if result.already_applied:
        summary += f" {len(result.already_applied)} file(s) already fixed."
    if unsafe_left:
        summary += f" {unsafe_left} more with --unsafe-fixes."
    if loaded is not None and fixed and write and loaded.frames:
        # A fix can uncover what it removed hid (torch names only the first failing guard), and
        # some recompiles are legitimate: `fix` profiles again and says which stay, and why.
        summary += " Profile again to see what the fixes leave, or run `recompile-fix fix -- <command>` to the end."
    if output_format in ("concise", "full") or show_diff:
        click.echo(summary, err=True)
        if result.outside:  # context (torch's own files, other folders): never an error
            outside = sorted({f.file for f in result.outside})
            named = ", ".join(outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
            click.echo(
                f"{len(result.outside)} more finding(s) outside {' '.join(paths)} (not changed): {named}.", err=True
            )
        if loaded is not None:
            click.echo(_accounting_line(result.profile or loaded, result, config.unsafe_fixes), err=True)
    if result.errors:
        sys.exit(2)
    if (check or show_diff) and fixed and not exit_zero:
        sys.exit(1)  # as ruff: --check and --diff fail while fixes are pending


def _accounting_line(loaded: Profile, result, unsafe_fixes: bool) -> str:
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
    accounting = account(
        loaded,
        result.findings + result.outside,
        unsafe_fixes=unsafe_fixes,
        deliberate_static=static_compile_site(loaded, project),
    )
    return f"Recompiles in the Profile: {accounting.summary()}."


@main.command()
@click.argument("reason", required=False)
def reasons(reason) -> None:
    """List the recompile reasons, or print one's page (an ID such as RC009, or a kind such as
    scalar_value): what torch guarded, an example, what changes it, which rule fixes it."""
    from recompile_fix.output import terminal_width, wrap
    from recompile_fix.profile.reason_classes import REASON_CLASSES, reason_class
    from recompile_fix.reason_docs import reason_page
    from recompile_fix.rules import ALL_RULES

    if reason:
        found = reason_class(reason)
        if found is None:
            raise UserError(f"no recompile reason {reason!r}; `recompile-fix reasons` lists them")
        click.echo(reason_page(found, ALL_RULES), nl=False)
        return
    width = terminal_width()
    for entry in REASON_CLASSES:
        click.echo(wrap(f"{entry.id}  {entry.kind:<24} {entry.title}", width, indent=" " * 31))


@main.command()
@click.argument("rule_id", required=False)
def rules(rule_id) -> None:
    """List the rules, or print one rule's docs (Markdown, as docs/rules/ID.md has it)."""
    from recompile_fix.output import terminal_width, wrap
    from recompile_fix.rule_docs import rule_page, rule_summary
    from recompile_fix.rules import ALL_RULES, rule_by_id

    if rule_id:
        rule = rule_by_id(rule_id)
        if rule is None:
            raise UserError(f"no rule {rule_id!r}; `recompile-fix rules` lists them")
        click.echo(rule_page(rule), nl=False)
        return
    width = terminal_width()
    for rule in ALL_RULES:
        line = f"{rule.id}  {rule.name:<24} {rule_summary(rule)}"
        click.echo(wrap(line, width, indent=" " * 31))


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
    profile_file, backend, unsafe_fixes, exact, rtol, atol, calls, fail_on_recompile, as_json, html_file, command
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


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
def fix(unsafe_fixes, rounds, show_diff, backend, profile_file, command) -> None:
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
    from recompile_fix.profile.model import save_profile
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
    files = len(result.rewrites)
    verb = "Would fix" if show_diff else "Fixed"
    summary = f"{verb} {len(result.kept)} verified finding(s) in {files} file(s)"
    if result.dropped:
        summary += f"; dropped {len(result.dropped)} that made things worse or changed nothing"
    summary += f" ({result.runs} runs of `{' '.join(command)}`)"
    if result.verification is not None:
        v = result.verification
        summary += f"; compiles {v.total('compiles', 'before')} -> {v.total('compiles', 'after')}"
    if not show_diff and result.profile is not None:
        written = save_profile(result.profile, profile_file or config.profile)
        summary += f"; wrote the fixed program's Profile to {written}"
    click.echo(summary + ".", err=True)
    if not result.converged or (show_diff and result.rewrites):
        sys.exit(1)


_EDITOR_GUIDE = Path(__file__).resolve().parent / "docs" / "editors.md"


@main.command(
    help="Run the language server on stdin/stdout: diagnostics, quick fixes, fix-all, suppress.\n\n"
    "Setups for VS Code, Neovim (0.7 to 0.11+) and Helix are in the editor guide, installed with "
    f"this package: {_EDITOR_GUIDE} (`recompile-fix lsp --guide` prints it)."
)
@click.option(
    "--debounce",
    type=click.FloatRange(0),
    default=None,
    metavar="SECONDS",
    help="Quiet time after a change before a file is analysed again [default: 0.3].",
)
@click.option("--guide", is_flag=True, help="Print the editor guide (Markdown) and exit.")
def lsp(debounce, guide) -> None:
    if guide:
        click.echo(_EDITOR_GUIDE.read_text(encoding="utf-8"), nl=False)
        return
    try:
        import pygls  # noqa: F401
    except ImportError:
        raise UserError(
            "the language server needs pygls (the `lsp` extra): install recompile-fix with [lsp] (README), "
            f"or `{sys.executable} -m pip install 'pygls>=2,<3'`"
        ) from None
    from recompile_fix.lsp.server import DEFAULT_DEBOUNCE, serve

    serve(DEFAULT_DEBOUNCE if debounce is None else debounce)


def _read_or_none(path: str, profile: "Profile") -> bytes | None:
    from recompile_fix.profile.files import read_named_file

    try:
        return read_named_file(path, ".", profile.interpreter)
    except OSError:
        return None


# -- verify and apply --verify: the click side -------------------------------------------


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
    apply_options: dict | None = None,
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
    for error in v.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    if not v.verified:
        return 1
    return 2 if v.errors else 0


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
    apply_options: dict | None = None,
) -> int:
    """`recompile-fix apply --verify`; returns the exit code (0 all verified and applied, 1 a fix
    was dropped or, with --check, verified fixes are pending, 2 error)."""
    from recompile_fix.pipeline.fix import diff_text
    from recompile_fix.progress import Progress
    from recompile_fix.verify.judge import NO_OP
    from recompile_fix.verify.prove import apply_verified
    from recompile_fix.verify.render import frame_table

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
        for finding in result.kept:
            click.echo(finding.describe(unsafe_fixes=True) + "\n    verified: makes nothing worse, outputs equal")
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
        summary += f"; dropped {len(result.dropped)} that made things worse or changed nothing"
    summary += f" ({result.runs} runs of `{' '.join(profile.command)}`)." if result.runs else "."
    click.echo(summary, err=True)
    if write and result.rewrites:
        profile.dump(profile_path)  # remember what was applied: a second apply is a no-op
    if result.errors:
        return 2
    if result.dropped or ((check or diff_exit) and result.kept):
        return 1
    return 0
