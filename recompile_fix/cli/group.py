"""The `recompile-fix` click group every command is added to (cli/__init__.py adds them): errors
as one line each, exit codes as ruff has them (0 clean, 1 findings left, 2 error), SIGTERM
unwound like Ctrl-C."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, NoReturn

import click

from recompile_fix.errors import Interrupted, UserError

__all__ = ["REFERENCE", "main"]

# The reference pages, in the repository's docs/ (the top-level --help ends with them).
REFERENCE = (
    "Reference: https://github.com/recompile-fix/recompile-fix/tree/main/docs (commands.md, "
    "configuration.md, profile.md: the Profile format, rules/, editors.md, torch-releases.md)."
)


def _fail(message: str) -> NoReturn:
    click.echo(f"recompile-fix: error: {message}", err=True)
    sys.exit(2)


_SignalHandler = Callable[[int, FrameType | None], Any] | int | None


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            _fail(str(exc))

    # No standalone_mode parameter: like click's standalone mode, this main always exits (with
    # the errors in our one-line form), so it overrides neither of click's overloads exactly.
    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        **extra: Any,
    ) -> NoReturn:
        # SIGTERM unwinds like Ctrl-C (temp directories removed, locks released), then exits
        # with 143; while a program runs, profile/run.py passes both on to it instead.
        previous = _raise_on_sigterm()
        # Usage errors in one line, like every other error (click prints three).
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
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


def _raise_on_sigterm() -> _SignalHandler:
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a test driving main() from a thread)
        return None


def _interrupted(exc: Interrupted) -> NoReturn:
    name = signal.Signals(exc.signum).name
    what = "aborted: no Profile written" if exc.aborted else "stopped"
    click.echo(f"recompile-fix: interrupted ({name}); {what}", err=True)
    sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=REFERENCE)
@click.version_option(package_name="recompile-fix")
def main() -> None:
    """Find the frames torch.compile recompiles, and edit the source so it stops."""
