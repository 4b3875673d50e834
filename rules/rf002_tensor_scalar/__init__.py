"""RF002 tensor-scalar, one folder: ``rule`` holds the rule (its docs, examples and logic);
``scalar_arguments`` holds the analysis only it uses."""

from .rule import RULE

__all__ = ["RULE"]
