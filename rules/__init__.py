"""The rule catalogue: one file per rule, each holding its docs, examples and logic."""

from recompile_fix.findings.rule import Rule
from recompile_fix.rules.rf001_mark_dynamic import RULE as RF001
from recompile_fix.rules.rf002_tensor_scalar import RULE as RF002
from recompile_fix.rules.rf003_tensor_hyperparameters import RULE as RF003
from recompile_fix.rules.rf004_nested_compile_region import RULE as RF004
from recompile_fix.rules.rf005_graph_break_shield import RULE as RF005
from recompile_fix.rules.rf006_counter_buffer import RULE as RF006
from recompile_fix.rules.rf007_regional_compile import RULE as RF007
from recompile_fix.rules.rf008_scheduled_dropout import RULE as RF008
from recompile_fix.rules.rf009_schedule_tensor import RULE as RF009
from recompile_fix.rules.rf010_lazy_default import RULE as RF010
from recompile_fix.rules.rf011_guard_dropping import RULE as RF011

__all__ = ["ALL_RULES", "rule_by_id"]

ALL_RULES: tuple[Rule, ...] = (RF001, RF002, RF003, RF004, RF005, RF006, RF007, RF008, RF009, RF010, RF011)


def rule_by_id(rule_id: str) -> Rule | None:
    return next((rule for rule in ALL_RULES if rule.id == rule_id.upper()), None)
