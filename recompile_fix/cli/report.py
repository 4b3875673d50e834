"""`recompile-fix report`: what a Profile recorded, per frame, with the fixes `apply` would make
(text, JSON, or one HTML page)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the command imports what it needs when it runs (a fast `--help`)
    from recompile_fix.findings.accounting import Accounting
    from recompile_fix.findings.finding import Finding
    from recompile_fix.profile.model import Profile

__all__ = ["report"]


@click.command()
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
def report(profile_file: str | None, as_json: bool, html_file: str | None, output_format: str | None) -> None:
    """Show what a Profile recorded: per frame, compiles, recompiles and why."""
    from recompile_fix.cli.deferred_imports import defer_heavy

    defer_heavy()  # a warm run answers from the caches: libcst loads only if a file is parsed
    from recompile_fix.output import terminal_width
    from recompile_fix.report import render_json, render_text

    shown, findings, accounting = _shown_and_findings(profile_file)
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
        from recompile_fix.rules import ALL_RULES

        page = render_page(
            shown, findings, finding_fixes(Path.cwd(), findings, ALL_RULES), root=".", accounting=accounting
        )
        Path(html_file).write_text(page, encoding="utf-8")
        click.echo(f"recompile-fix: wrote {html_file}", err=True)


def _shown_and_findings(profile_file: str | None) -> tuple[Profile, list[Finding], Accounting]:
    """The Profile as the report shows it (a frame whose code changed since profiling is shown as
    recorded), the Findings `apply` would fix, and where the Profile's recompiles end."""
    import copy

    from recompile_fix.analysis.compile_calls import static_compile_site
    from recompile_fix.analysis.project import Project
    from recompile_fix.analysis.relocate import anchor
    from recompile_fix.config import enter_project, load_config
    from recompile_fix.findings.accounting import account
    from recompile_fix.pipeline.fix import find, finding_order
    from recompile_fix.profile.model import Profile
    from recompile_fix.profile.validate import check_against_sources
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
    if found.memo is not None:
        found.memo.save()  # what the rules found, for the next run over the same bytes
    # A fix that was already in the code the Profile ran did not remove its recompile: shown
    # with no fix and why; one put in since counts as a fix (the Profile predates it).
    in_run = [(f, where) for f, where in found.present if _profiled_with(f.file, loaded)]
    kept_anyway = [_still_recompiled(f, where) for f, where in in_run]
    findings = sorted([*found.findings, *found.outside, *kept_anyway], key=finding_order)
    planned = [*findings, *(f for f, where in found.present if (f, where) not in in_run)]
    accounting = account(shown, planned, deliberate_static=static_compile_site(anchored.profile, project))
    return shown, findings, accounting


def _profiled_with(path: str, profile: Profile) -> bool:
    """Are the file's bytes now the ones the Profile's run had?"""
    from recompile_fix.profile.model import sha256_bytes

    try:
        return profile.sources.get(path) == sha256_bytes(Path(path).read_bytes())
    except OSError:
        return False


def _still_recompiled(finding: Finding, where: str) -> Finding:
    import copy

    from recompile_fix.findings.finding import Safety

    shown = copy.copy(finding)
    shown.safety = Safety.NONE
    # "...(2 compiles): mark it dynamic before the call" -> what it is, and that the fix is there.
    shown.message = finding.message.rsplit(": ", 1)[0] + "; its fix was in the code the Profile ran"
    shown.notes = [f"the fix is in the code the Profile ran ({where}), and the frame still recompiled"]
    return shown


def _read_or_none(path: str, profile: Profile) -> bytes | None:
    from recompile_fix.profile.files import read_named_file

    try:
        return read_named_file(path, ".", profile.interpreter)
    except OSError:
        return None
