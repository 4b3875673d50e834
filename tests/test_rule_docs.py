"""docs/rules/ holds each rule's page, generated from the rule's own file: a test keeps them in
sync (``pytest tests/test_rule_docs.py --update-golden`` rewrites them; review the diff), and
the links the outputs carry point at them."""

from conftest import ROOT
from recompile_fix.rule_docs import pages, rule_page, rule_url, write_pages
from recompile_fix.rules import ALL_RULES

DOCS = ROOT / "docs" / "rules"


def test_rule_pages_are_generated_from_the_rules(request):
    if request.config.getoption("--update-golden"):
        write_pages(DOCS, ALL_RULES)
    expected = pages(ALL_RULES)
    on_disk = {path.name: path.read_text(encoding="utf-8") for path in DOCS.iterdir()}
    assert sorted(on_disk) == sorted(expected), "run `pytest tests/test_rule_docs.py --update-golden`"
    stale = [name for name in expected if on_disk[name] != expected[name]]
    assert not stale, f"{stale} out of date with rules/: run `pytest tests/test_rule_docs.py --update-golden`"


def test_rules_command_prints_the_page(cli):
    for rule in ALL_RULES:
        assert cli("rules", rule.id.lower(), check=0).stdout == rule_page(rule)


def test_urls_point_at_the_pages():
    for rule in ALL_RULES:
        url = rule_url(rule.id)
        assert url.endswith(f"/docs/rules/{rule.id}.md") and (DOCS / f"{rule.id}.md").is_file()
        page = (DOCS / f"{rule.id}.md").read_text(encoding="utf-8")
        assert f"# {rule.id} {rule.name}" in page and "## What it does" in page and "## Fix safety" in page
