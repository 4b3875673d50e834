"""`recompile-fix rules` and `recompile-fix reasons`: list the rules or the recompile reasons, or
print one's page (Markdown, as docs/rules/ and docs/reasons/ have them)."""

from __future__ import annotations

import click

from recompile_fix.errors import UserError

__all__ = ["reasons", "rules"]


@click.command()
@click.argument("reason", required=False)
def reasons(reason: str | None) -> None:
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


@click.command()
@click.argument("rule_id", required=False)
def rules(rule_id: str | None) -> None:
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
