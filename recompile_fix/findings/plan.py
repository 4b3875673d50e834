"""Planning: Profile -> Findings. Each rule reads the Profile (and the sources it names) and
says where its fix goes. Nothing is edited here."""

from __future__ import annotations

from recompile_fix.analysis.project import Project
from recompile_fix.findings.block_strategy import choose_block_compile
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import Profile

__all__ = ["plan"]


def plan(profile: Profile, project: Project, rules: tuple[Rule, ...]) -> list[Finding]:
    findings: list[Finding] = []
    for rule in rules:
        for finding in rule.plan(profile, project):
            finding.torch_version = finding.torch_version or profile.torch_version
            findings.append(finding)
    findings.sort(key=lambda f: (f.file, f.location.line, f.location.col or 0, f.rule))
    return choose_block_compile(findings)
