"""Planning: Profile -> Findings. Each rule reads the Profile (and the sources it names) and
says where its fix goes. Nothing is edited here."""

from __future__ import annotations

from recompile_fix.findings import Finding
from recompile_fix.profile import Profile
from recompile_fix.rule import Project, Rule


def plan(profile: Profile, project: Project, rules: tuple[Rule, ...]) -> list[Finding]:
    findings: list[Finding] = []
    for rule in rules:
        findings.extend(rule.plan(profile, project))
    findings.sort(key=lambda f: (f.file, f.location.line, f.location.col or 0, f.rule))
    return findings
