"""The shape every rule in rules/ has. A rule is one folder (``rules/rfNNN_name/rule.py``): its docs (the class docstring, in the
shape What it does / Why is this bad? / Example / Fix safety / Profile evidence), the reasons it
consumes, how it plans Findings, how it turns one into Edits, and its examples."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recompile_fix.findings.arbitration import Claim, Preference
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.releases import TorchApi

__all__ = ["Example", "Rule"]

if TYPE_CHECKING:  # named only in signatures: Edits are the next stage, and the parsed
    # source (libcst) loads when a rule first runs, not with the Rule class
    from recompile_fix.analysis.project import Project
    from recompile_fix.analysis.source import SourceFile
    from recompile_fix.edits.edit import Edit
    from recompile_fix.profile.model import Profile


@dataclass(frozen=True)
class Example:
    """An excerpt of a golden case (``golden/<golden>/``): in its ``program.in.py``, ``before``
    becomes ``after`` when the rule runs on the Profile recorded there; ``after=None`` marks an
    excerpt the rule must leave alone. ``tests/test_rule_examples.py`` runs every example;
    `recompile-fix rules ID` prints them."""

    before: str
    after: str | None
    golden: str  # the case, e.g. "RF001/seed_shape_change"

    def diff(self) -> str:
        """The example as a unified diff (or, left alone, as the code itself)."""
        if self.after is None:
            return "".join(f"  {line}" for line in self.before.splitlines(keepends=True))
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True), self.after.splitlines(keepends=True), "before", "after", n=2
        )
        return "".join(lines)


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
    # frames compiling). E.g. a fix that inserts torch._dynamo.graph_break(). "same_compiles": the
    # fix keeps the compiles and makes each cheaper (a run that compiles as before is not a fix
    # that "changes nothing").
    verify_allows: tuple[str, ...] = ()
    # Every torch API the fixes write (or the notes suggest), with the first release that has
    # it: the rule's own version gates read these, `rewrite` refuses an edit naming one the
    # Finding's release lacks, and docs/torch-releases.md is rendered from them.
    emits: tuple[TorchApi, ...] = ()
    # What else of the Profile drives the rule where no reason kind does (e.g. "graph_breaks":
    # the breaks the run recorded).
    evidence: tuple[str, ...] = ()
    # A rule that only reports (its Findings are all Safety.NONE and it has no fix): its examples
    # are code it leaves alone (tests/test_rule_examples.py).
    finding_only: bool = False

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

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """Is the finding's fix already in the code (the tool's own edit from an earlier round,
        or a hand-written equivalent)? Where, in a few words; None when it is not. A rule may
        narrow the finding to what is still missing (its ``params``) and return None.

        This default recognises the rule's own edits, made again: each insertion would put in
        exactly the text already at that point, each replacement the text already in its span.
        Rules that recognise hand-written forms say more."""
        try:
            edits = self.fix(finding, source, source.torch_name_at(finding.location.line) or "torch")
        except Exception:  # noqa: BLE001 - cannot tell: let the fix run and report its own error
            return None
        if not edits:
            return None
        text = source.text
        inserted: dict[int, str] = {}
        found: list[tuple[int, str]] = []
        for edit in edits:
            if edit.start == edit.end:  # insertions at one point go in in order
                inserted[edit.start] = inserted.get(edit.start, "") + edit.new_text
            elif text[edit.start : edit.end] == edit.new_text:
                found.append((edit.start, edit.new_text))
            else:
                return None
        for at, new in inserted.items():
            if text[max(0, at - len(new)) : at] == new:
                found.append((at - len(new), new))
            elif text[at : at + len(new)] == new:
                found.append((at, new))
            else:
                return None
        start, new = min(found)
        return f"line {text.count(chr(10), 0, start) + 1}: `{new.strip().splitlines()[0]}`"

    def honour_facts(self, finding: Finding, profile: Profile, source: SourceFile) -> Finding | None:
        """A static Finding (``plan_static``) in the light of what a Profile established about the
        program (e.g. ``Profile.trains``): static mode must not contradict the Profile, also for a
        file the Profile no longer matches (already fixed, edited since). None: the Profile
        shows there is nothing to fix (left out). Default: as it is."""
        return finding

    def honour_training(
        self,
        finding: Finding,
        source: SourceFile,
        where: Callable[[], str | None],
        backend: str | None = None,
    ) -> Finding:
        """The Finding where a file of the project that neither the Profile nor this file saw
        runs a backward pass (a training script beside the inference script profiled); asked
        only where there is one. ``where()``: that call and its file (searched once per run);
        ``backend``: the one the Profile was recorded with (`--backend`). Default: as it is."""
        return finding

    def claims(self, finding: Finding) -> list[Claim]:
        """What the finding's fix edits, where another rule's fix could edit the same thing
        (``findings.arbitration``: of two such fixes one is kept). Default: nothing another
        rule's fix could."""
        return []

    def prefer(self, finding: Finding, rival: Finding) -> Preference | None:
        """Of the finding's fix and ``rival``'s (another rule's, claiming the same thing), which
        to keep and why, from the two Findings' evidence; None: this rule has no word on it (the
        rival's rule may)."""
        return None

    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")
