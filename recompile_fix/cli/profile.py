"""`recompile-fix profile`: run a command under the recorder (or read a TORCH_TRACE directory)
and write a Profile."""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

import click

from recompile_fix.errors import Interrupted, UserError

if TYPE_CHECKING:  # the command imports what it needs when it runs (a fast `--help`)
    from recompile_fix.profile.model import Profile

__all__ = ["profile"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
def profile(output: str | None, backend: str | None, trace_dir: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND under the recorder and write a Profile.

    \b
    recompile-fix profile -- python train.py --epochs 1
    recompile-fix profile -- python -m mypkg.train
    recompile-fix profile -- torchrun --nproc-per-node 2 train.py
    recompile-fix profile --from-trace /tmp/trace   (TORCH_TRACE=/tmp/trace python train.py)
    """
    from recompile_fix.config import load_config
    from recompile_fix.profile.model import save_profile
    from recompile_fix.profile.run import recording_summary

    output = output or load_config().profile
    if trace_dir is not None:
        if command or backend:
            raise UserError("--from-trace reads a finished run: give no command and no --backend")
        result, exit_code = _read_trace(trace_dir), 0
    else:
        result, exit_code = _run(command, backend, output)
    written = save_profile(result, output)
    click.echo(_profile_summary(result, exit_code, str(written), output, recording_summary(result)), err=True)
    if result.frames and str(written) == output:
        _find_ahead(result)
    sys.exit(exit_code)


def _find_ahead(result: Profile) -> None:
    """What the rules find from the new Profile, found now and kept in the derived cache
    (pipeline/memo.py) as `report` keeps it: the editor's first file, `report` and `apply
    --check` then answer without parsing (under 0.1 s from didOpen, where planning cold loads
    libcst and parses). Only the profiled files are read; nothing is printed; any failure only
    leaves the next run to find them itself."""
    import os
    from pathlib import Path

    from recompile_fix.config import load_config
    from recompile_fix.pipeline.find import find
    from recompile_fix.rules import ALL_RULES

    try:
        root = Path.cwd().resolve()
        files = [p for p in result.sources if not os.path.isabs(p) and (root / p).is_file()]
        if files:
            found = find(files, result, ALL_RULES, root=root, config=load_config(), use_cache=False, read_derived=True)
            if found.memo is not None:
                found.memo.save()
    except Exception:  # noqa: BLE001 - a head start, never the profile run's failure
        pass


def _read_trace(trace_dir: str) -> Profile:
    from recompile_fix.profile.trace_reader import profile_from_trace

    result: Profile = profile_from_trace(trace_dir)
    if result.frames and result.torch_version is None:
        click.echo(
            "recompile-fix: warning: the trace does not say which torch wrote it (torch < 2.10 names it "
            "nowhere, and its torch is not installed here): fixes that depend on the release are not made",
            err=True,
        )
    return result


def _run(command: tuple[str, ...], backend: str | None, output: str) -> tuple[Profile, int]:
    """The Profile of one run of ``command`` and its exit code; stopped by a signal, what it
    compiled so far is written to ``output`` and we exit as it did."""
    from recompile_fix.profile.model import save_profile
    from recompile_fix.profile.run import run_profiled
    from recompile_fix.progress import Progress

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
    return result, exit_code


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
