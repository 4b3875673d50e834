"""Rule docs as Markdown pages, generated from each rule's own file: its docstring (What it does /
Why is this bad? / Example / Fix safety / Profile evidence) and the golden cases it runs.

`recompile-fix rules ID` prints a page; docs/rules/ID.md holds the same page (a test keeps them
in sync: ``pytest tests/test_rule_docs.py --update-golden`` rewrites them), and the links in
JSON, SARIF and editor diagnostics point there."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path

from recompile_fix.findings.rule import Rule

__all__ = [
    "REPOSITORY",
    "index_page",
    "rule_file",
    "rule_page",
    "rule_summary",
    "rule_url",
    "write_generated",
    "write_pages",
]

REPOSITORY = "https://github.com/recompile-fix/recompile-fix"
_DOCS = f"{REPOSITORY}/blob/main/docs/rules"


def rule_url(rule_id: str) -> str:
    """Where a rule's page is published (docs/rules/ID.md of the repository)."""
    return f"{_DOCS}/{rule_id.upper()}.md"


def rule_file(rule: Rule) -> str:
    """The rule's source file, as the repository spells it (``rules/rf001_mark_dynamic/rule.py``):
    its folder in ``rules/`` and the file in it."""
    path = Path(inspect.getfile(type(rule)))
    return f"rules/{path.parent.name}/{path.name}"


def rule_summary(rule: Rule) -> str:
    """The first paragraph of "What it does", on one line."""
    return rule.docs().split("## What it does", 1)[-1].strip().split("\n\n", 1)[0].replace("\n", " ")


def rule_page(rule: Rule) -> str:
    """The rule's page: its docs, then its golden cases as diffs (each run by the tests)."""
    parts = [f"# {rule.id} {rule.name}\n\n{rule.docs()}\n"]
    if rule.examples:
        parts.append("\n## Golden cases\n")
        for example in rule.examples:
            left_alone = example.after is None
            where = f"`golden/{example.golden}/program.in.py`" + (" (left alone)" if left_alone else "")
            parts.append(f"\n{where}:\n\n```{'python' if left_alone else 'diff'}\n")
            body = example.before if left_alone else example.diff()
            parts.append(body if body.endswith("\n") else body + "\n")
            parts.append("```\n")
    return "".join(parts)


def _generated_notice(rule: Rule) -> str:
    return (
        f"<!-- Generated from {rule_file(rule)} (`recompile-fix rules {rule.id}` prints it); "
        "edit the rule's docstring, then run `pytest tests/test_rule_docs.py --update-golden`. -->\n"
    )


def index_page(rules: Iterable[Rule]) -> str:
    rows = "".join(f"| [{r.id}]({r.id}.md) | {r.name} | {rule_summary(r)} |\n" for r in rules)
    return (
        "<!-- Generated from rules/ by `pytest tests/test_rule_docs.py --update-golden`. -->\n"
        "# Rules\n\n"
        "Each page is generated from the rule's own file in `rules/`; "
        "`recompile-fix rules ID` prints the same page.\n\n"
        "| id | name | what it does |\n| --- | --- | --- |\n" + rows
    )


def pages(rules: Iterable[Rule]) -> dict[str, str]:
    """File name -> content of docs/rules/."""
    rules = list(rules)
    found = {f"{r.id}.md": _generated_notice(r) + "\n" + rule_page(r) for r in rules}
    found["README.md"] = index_page(rules)
    return found


def write_pages(directory: Path, rules: Iterable[Rule]) -> list[str]:
    """Write docs/rules/; return the names of the files whose content changed."""
    return write_generated(directory, pages(rules))


def write_generated(directory: Path, generated: dict[str, str]) -> list[str]:
    """Write generated pages (file name -> content) into ``directory``; the names that changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in generated.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed
