"""Planning: Profile -> Findings. Each rule reads the Profile (and the sources it names) and
says where its fix goes. Nothing is edited here."""

from __future__ import annotations

from recompile_fix.analysis.project import Project
from recompile_fix.findings.accounting import infer_covers
from recompile_fix.findings.alone import unproven_where_other_guards_fail_too, unproven_where_sizes_change_too
from recompile_fix.findings.arbitration import arbitrate
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import Profile

__all__ = ["plan"]


def plan(profile: Profile, project: Project, rules: tuple[Rule, ...]) -> list[Finding]:
    findings: list[Finding] = []
    for rule in rules:
        for finding in rule.plan(profile, project):
            finding.torch_version = finding.torch_version or profile.torch_version
            if not finding.covers:  # the rule did not say which recompiles it is about
                finding.covers = infer_covers(finding, rule.consumes, profile)
            findings.append(finding)
    findings = _without_moot_findings(findings, rules)
    unproven_where_sizes_change_too(findings, profile)
    unproven_where_other_guards_fail_too(findings, profile)
    findings.sort(key=lambda f: (f.file, f.location.line, f.location.col or 0, f.rule))
    return arbitrate(findings, rules)


def _without_moot_findings(findings: list[Finding], rules: tuple[Rule, ...]) -> list[Finding]:
    """The findings less those another rule's fix makes moot: a graph break where another fix
    makes the frame compile once, then every [no fix] (that break among them) whose recompiles
    another rule's fix covers (trials: a "[no fix]" under nearly every 0-d tensor fix, saying only
    that the other fix is better)."""
    _drop_splits_another_fix_makes_moot(findings, rules)
    return [f for f in findings if not _another_rule_fixes(f, findings)]


def _drop_splits_another_fix_makes_moot(findings: list[Finding], rules: tuple[Rule, ...]) -> None:
    """A fix that splits a frame (a graph break: the rule's ``verify_allows`` names resume
    frames) trades one more compile for a prefix compiled once. Where another rule's fix covers
    the same recompiles, the frame compiles once with it, and the break would only add a frame:
    no fix, and the note says which fix makes it moot. Also where that fix is unsafe:
    `--unsafe-fixes` wrote both (a trial: 3 -> 4 compiles), and `fix` proves the other."""
    splitters = {rule.id for rule in rules if "resume_frames" in rule.verify_allows}
    for split in findings:
        if split.rule not in splitters or split.safety is Safety.NONE:
            continue
        better = next(
            (
                f
                for f in findings
                if f.rule not in splitters and f.fixable and not f.params.get("may_stay_guarded") and _overlap(f, split)
            ),
            None,
        )
        if better is not None:
            split.safety = Safety.NONE
            kind = "safe" if better.safety is Safety.SAFE else "unsafe"
            split.notes = [
                f"{better.rule}'s {kind} fix at {better.file}:{better.location.line} makes the frame compile once "
                "for these values; a graph break would only add a frame (one more compile)"
            ]


def _another_rule_fixes(finding: Finding, findings: list[Finding]) -> bool:
    """Is ``finding`` a [no fix] whose every recompile another rule's fix covers (RF014's "it
    stays a float" beside RF008's ScheduledDropout for the same `p`)? It says nothing then but
    that one rule cannot, beside the fix that can."""
    if finding.fixable or not finding.covers or not all(mine.get("sources") for mine in finding.covers):
        return False
    fixed = [c for f in findings if f.rule != finding.rule and f.fixable for c in f.covers if c.get("sources")]
    return all(
        any(c.get("frame") == mine.get("frame") and set(mine["sources"]) <= set(c["sources"]) for c in fixed)
        for mine in finding.covers
    )


def _overlap(a: Finding, b: Finding) -> bool:
    for x in a.covers:
        for y in b.covers:
            if x.get("frame") != y.get("frame"):
                continue
            if not x.get("sources") or not y.get("sources") or set(x["sources"]) & set(y["sources"]):
                return True
    return False
