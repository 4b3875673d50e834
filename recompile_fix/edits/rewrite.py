"""Rewriting: Findings -> Edits for one file. Adds ``import torch`` where a fix needs it and the
file lacks it, and uses the file's own alias (``import torch as th``) where it has one."""

from __future__ import annotations

from dataclasses import dataclass, field

from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.edits.edit import Edit, apply_edits
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.releases import check_edits, installed_torch_version
from recompile_fix.findings.rule import Rule

__all__ = ["FileRewrite", "rewrite"]


@dataclass
class FileRewrite:
    path: str
    before: str
    after: str
    edits: list[Edit] = field(default_factory=list)
    applied: list[Finding] = field(default_factory=list)
    skipped: list[tuple[Finding, str]] = field(default_factory=list)  # (finding, why)

    @property
    def changed(self) -> bool:
        return self.before != self.after


def rewrite(path: str, source: SourceFile, findings: list[Finding], rules: dict[str, Rule]) -> FileRewrite:
    torch_name = source.torch_alias or "torch"
    result = FileRewrite(path=path, before=source.text, after=source.text)
    for finding in findings:
        try:
            edits = rules[finding.rule].fix(finding, source, torch_name)
        except SourceError:
            raise  # the file does not parse (for the tree this fix reads): the whole file is skipped
        except Exception as exc:  # one broken fix must not lose the file's other fixes
            result.skipped.append((finding, f"internal error in {finding.rule}: {exc!r}"))
            continue
        # Only what the Finding's torch runs (the Profile's; static mode: the installed one).
        wrong_release = check_edits(rules[finding.rule], edits, finding.torch_version or installed_torch_version())
        if wrong_release is not None:
            result.skipped.append((finding, wrong_release))
            continue
        if any(new.overlaps(old) for new in edits for old in result.edits):
            result.skipped.append((finding, "overlaps another fix in this file"))
            continue
        result.edits.extend(edits)
        result.applied.append(finding)
    if result.edits and source.torch_alias is None:
        at = source.import_insertion_offset()
        prefix = "" if at == 0 or source.text[:at].endswith("\n") else "\n"
        result.edits.insert(0, Edit(path, at, at, f"{prefix}import torch\n", "import"))
    result.after = apply_edits(source.text, result.edits)
    return result
