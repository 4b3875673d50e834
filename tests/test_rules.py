"""Every rule is one self-documenting file: id, docs in the ruff shape, examples, and it ships in
the installed package."""

import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import REASON_KINDS
from recompile_fix.rules import ALL_RULES

SECTIONS = ["## What it does", "## Why is this bad?", "## Example", "## Fix safety", "## Profile evidence"]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_rule_docs_have_every_section_in_order(rule):
    docs = rule.docs()
    positions = [docs.find(s) for s in SECTIONS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
    assert rule.id.startswith("RF") and rule.name and rule.examples
    # What drives it: the reason kinds it consumes (each one the Profile knows), other evidence
    # the Profile records (graph breaks), or the source alone (static mode).
    assert set(rule.consumes) <= set(REASON_KINDS), rule.consumes
    assert rule.consumes or rule.evidence or type(rule).plan_static is not Rule.plan_static


def test_rules_command_lists_and_explains(cli):
    listing = cli("rules", check=0).stdout
    for rule in ALL_RULES:
        assert rule.id in listing and rule.name in listing
    one = cli("rules", "rf001", check=0).stdout
    assert one.startswith("# RF001 mark-dynamic") and "## Fix safety" in one
    assert cli("rules", "RF999", check=2).stderr.startswith("recompile-fix: error: no rule")


def test_wheel_ships_the_rules(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("recompile_fix-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "recompile_fix/rules/rf001_mark_dynamic/rule.py" in names
    assert "recompile_fix/_bootstrap/sitecustomize.py" in names
    assert "recompile_fix/docs/editors.md" in names  # `recompile-fix lsp --guide`
