"""RF017 contiguous-view, one folder: ``rule`` holds the rule (its docs, examples and logic)."""

from .rule import RULE

__all__ = ["RULE"]
