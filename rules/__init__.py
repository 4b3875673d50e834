"""The rule catalogue: one folder per rule (``rfNNN_name/``), each holding the rule's docs, examples
and logic in ``rule.py`` and the analyses only it uses; a folder exports its rule as ``RULE``.

The rules are found, not listed: every subpackage named ``rfNNN_*``, in id order, so a new folder
is a new rule."""

import importlib
import pkgutil
import re

from recompile_fix.findings.rule import Rule

__all__ = ["ALL_RULES", "rule_by_id"]

_RULE_FOLDER = re.compile(r"rf\d{3}_\w+")


def _discover() -> tuple[Rule, ...]:
    folders = sorted(
        info.name for info in pkgutil.iter_modules(__path__) if info.ispkg and _RULE_FOLDER.fullmatch(info.name)
    )
    rules = [importlib.import_module(f"{__name__}.{folder}").RULE for folder in folders]
    return tuple(sorted(rules, key=lambda rule: rule.id))


ALL_RULES: tuple[Rule, ...] = _discover()


def rule_by_id(rule_id: str) -> Rule | None:
    return next((rule for rule in ALL_RULES if rule.id == rule_id.upper()), None)
