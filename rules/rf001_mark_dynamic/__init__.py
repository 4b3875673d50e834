"""RF001 mark-dynamic, one folder: ``rule`` holds the rule (its docs, examples and logic),
``site_plan`` its plan for one call site and ``marks`` the marks as code and words;
``compile_call``, ``graph_dims``, ``size_evidence``, ``size_uses`` hold the analyses only it uses."""

from .rule import RULE

__all__ = ["RULE"]
