"""Findings for people and machines: text (ruff-style lines), json, sarif (2.1.0), github
(workflow annotations)."""

from __future__ import annotations

import json

import recompile_fix
from recompile_fix.findings.finding import Finding, Safety

__all__ = ["FORMATS", "render", "sarif"]

FORMATS = ("text", "json", "sarif", "github")
_SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def render(findings: list[Finding], fmt: str, *, unsafe_fixes: bool = False, rules=()) -> str:
    if fmt == "text":
        return "".join(f.describe(unsafe_fixes=unsafe_fixes) + "\n" for f in findings)
    if fmt == "json":
        return json.dumps([_json(f) for f in findings], indent=1) + "\n"
    if fmt == "github":
        return "".join(_github(f) + "\n" for f in findings)
    if fmt == "sarif":
        return json.dumps(sarif(findings, rules), indent=1) + "\n"
    raise ValueError(fmt)


def _json(finding: Finding) -> dict:
    data = finding.to_json()
    data["fix_available"] = finding.safety is not Safety.NONE
    return data


def _escape_github(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github(finding: Finding) -> str:
    loc = finding.location
    level = "warning" if finding.fixable else "notice"
    message = finding.message + "".join(f" Note: {n}" for n in finding.notes)
    return (
        f"::{level} title=recompile-fix ({finding.rule}),file={finding.file},line={loc.line},"
        f"col={(loc.col or 0) + 1}::{finding.rule} {_escape_github(message)}"
    )


def sarif(findings: list[Finding], rules=()) -> dict:
    rule_entries = []
    index = {}
    for rule in rules:
        index[rule.id] = len(rule_entries)
        docs = rule.docs()
        rule_entries.append(
            {
                "id": rule.id,
                "name": rule.name,
                "shortDescription": {"text": docs.split("## What it does", 1)[-1].strip().split("\n\n", 1)[0]},
                "help": {"text": docs, "markdown": docs},
            }
        )
    results = []
    for f in findings:
        loc = f.location
        region = {"startLine": loc.line, "startColumn": (loc.col or 0) + 1}
        if loc.end_line:
            region["endLine"] = loc.end_line
        if loc.end_col is not None and loc.end_line:
            region["endColumn"] = loc.end_col + 1
        result = {
            "ruleId": f.rule,
            "level": "warning" if f.fixable else "note",
            "message": {"text": f.message + "".join(f"\nNote: {n}" for n in f.notes)},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.file}, "region": region}}],
            "properties": {"safety": f.safety.value, "confidence": f.confidence, "evidence": f.evidence},
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        results.append(result)
    return {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "recompile-fix",
                        "version": recompile_fix.__version__,
                        "informationUri": "https://github.com/recompile-fix/recompile-fix",
                        "rules": rule_entries,
                    }
                },
                "results": results,
            }
        ],
    }
