"""The shape every rule in rules/ has. A rule is one file: its docs (the class docstring, in the
shape What it does / Why is this bad? / Example / Fix safety / Profile evidence), the reasons it
consumes, how it plans Findings, how it turns one into Edits, and its examples."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.findings.finding import Finding
from recompile_fix.profile.model import Profile

if TYPE_CHECKING:  # a rule's fix makes Edits (the next stage); only its signature names them
    from recompile_fix.edits.edit import Edit


@dataclass(frozen=True)
class Example:
    """A before/after pair for the docs (the golden files hold the full, recorded cases)."""

    before: str
    after: str


class Rule:
    id: str = ""
    name: str = ""
    message: str = ""
    # Reason kinds (see recompile_fix.profile.model.REASON_KINDS) this rule turns into fixes.
    consumes: tuple[str, ...] = ()
    # Substrings without which the rule cannot fire in a file (a cheap prefilter): a file needs
    # one of ``triggers`` and every one of ``requires``.
    triggers: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()
    # What `verify` must not count against this rule's fix because the fix does it on purpose:
    # "graph_breaks" (more graph breaks) and/or "resume_frames" (new torch_dynamo_resume_in_*
    # frames compiling). E.g. a fix that inserts torch._dynamo.graph_break().
    verify_allows: tuple[str, ...] = ()

    def may_fire(self, data: bytes) -> bool:
        """Whether a file with these bytes can hold the rule's pattern at all."""
        return (not self.triggers or any(t.encode() in data for t in self.triggers)) and all(
            r.encode() in data for r in self.requires
        )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        """Findings from a Profile."""
        return []

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        """Findings from the source alone (static mode); most rules need a Profile."""
        return []

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        """The edits for one finding. ``torch_name`` is how the file spells ``torch``."""
        raise NotImplementedError

    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")
