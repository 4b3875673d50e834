"""The rule catalogue: one file per rule, each holding its docs, examples and logic."""

from recompile_fix.rule import Rule
from recompile_fix.rules.rf001_mark_dynamic import RULE as RF001

ALL_RULES: tuple[Rule, ...] = (RF001,)


def rule_by_id(rule_id: str) -> Rule | None:
    return next((rule for rule in ALL_RULES if rule.id == rule_id.upper()), None)
