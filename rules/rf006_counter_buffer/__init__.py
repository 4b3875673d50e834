"""RF006 counter-buffer, one folder: ``rule`` holds the rule (its docs, examples and logic);
``counters`` holds the analysis only it uses."""

from .rule import RULE

__all__ = ["RULE"]
