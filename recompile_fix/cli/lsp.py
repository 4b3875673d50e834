"""`recompile-fix lsp`: the language server on stdin/stdout (lsp/server.py), or its editor guide.
Nothing but click is imported before the server starts (an editor waits for it)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from recompile_fix.errors import UserError

__all__ = ["lsp"]

# Installed with the package (recompile_fix/docs/), so `lsp --help` can name a file that exists.
_EDITOR_GUIDE = Path(__file__).resolve().parent.parent / "docs" / "editors.md"


@click.command(
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
def lsp(debounce: float | None, guide: bool) -> None:
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
