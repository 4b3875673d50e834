"""The `recompile-fix` command line (the entry point is ``recompile_fix.cli:main``): the group in
cli/group.py and a module per command, each importing what it needs only when it runs (a fast
`--help`, and a fast `lsp` start for the editor). Exit codes as ruff has them: 0 clean, 1
findings left (with --check), 2 error."""

from recompile_fix.cli.apply import apply
from recompile_fix.cli.fix import fix
from recompile_fix.cli.group import main
from recompile_fix.cli.lsp import lsp
from recompile_fix.cli.profile import profile
from recompile_fix.cli.report import report
from recompile_fix.cli.rules import reasons, rules
from recompile_fix.cli.verify import verify

__all__ = ["apply", "fix", "lsp", "main", "profile", "reasons", "report", "rules", "verify"]

for _command in (apply, fix, lsp, profile, reasons, report, rules, verify):
    main.add_command(_command)
