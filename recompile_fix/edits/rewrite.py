"""Rewriting: Findings -> Edits for one file. Adds ``import torch`` where a fix needs it and the
file lacks it, and uses the file's own alias (``import torch as th``) where it has one. Every
result passes ``proof.prove`` (it compiles, binds no name that captures another, changes nothing
outside its edits, keeps the file's line endings): a fix that fails it is left out, with why."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.edits.edit import Edit, apply_edits
from recompile_fix.edits.format import line_length_of, reflow_edits
from recompile_fix.edits.proof import FixEdits, prove, with_line_endings
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


def rewrite(
    path: str, source: SourceFile, findings: list[Finding], rules: dict[str, Rule], *, root: str | Path | None = None
) -> FileRewrite:
    """``findings``' fixes of one file. ``root``: what a relative ``source.path`` is relative to
    (the project's formatter settings are read from where the file lies)."""
    alias = source.fresh_torch_alias
    result = FileRewrite(path=path, before=source.text, after=source.text)
    planned: list[tuple[Finding, FixEdits]] = []
    taken: list[Edit] = []
    located = Path(root, source.path) if root is not None else source.path  # relative, no root: unknown
    with line_length_of(
        located if located.is_absolute() or root is not None else None
    ) as line_length:  # inserted statements: the project's length
        fixes = [
            (finding, _fix(rules[finding.rule], finding, source, source.torch_name_at(finding.location.line) or alias))
            for finding in findings
        ]
    order = {id(finding): i for i, finding in enumerate(findings)}
    for finding, edits_or_error in sorted(fixes, key=lambda fix: _runs_before(fix[0])):
        if isinstance(edits_or_error, str):
            result.skipped.append((finding, edits_or_error))
            continue
        edits = edits_or_error
        # Only what the Finding's torch runs (the Profile's; static mode: the installed one).
        wrong_release = check_edits(rules[finding.rule], edits, finding.torch_version or installed_torch_version(root))
        if wrong_release is not None:
            result.skipped.append((finding, wrong_release))
            continue
        # What another finding's fix inserts at the same place already (`, dynamic=True` into one
        # compile call, one tensor's mark at one call): once, before the proof reads the text.
        edits = _without_repeated_lines(edits, taken)
        edits = _without_marks_made_above(edits, taken, source.text)
        if any(new.overlaps(old) for new in edits for old in taken):
            result.skipped.append((finding, "overlaps another fix in this file"))
            continue
        reflowed = edits
        if line_length is not None:  # the project's formatter is configured: follow it
            reflowed = reflow_edits(source.text, source.syntax, edits, line_length, source.byte_offset)
        if not any(new.overlaps(old) for new in reflowed for old in taken):
            edits = reflowed  # a statement the fix made too long, as the project's formatter writes it
        edits = with_line_endings(source.text, edits)
        taken.extend(edits)
        planned.append((finding, FixEdits(tuple(edits), _anchor(source, finding, edits))))
    planned = _proven(source, planned, result)
    planned = _together(source, planned, result)
    for _, fix in planned:
        result.edits.extend(fix.edits)
    result.applied = sorted((finding for finding, _ in planned), key=lambda f: order[id(f)])
    result.edits[:0] = _import_edits(path, source, result.edits)
    result.after = apply_edits(source.text, result.edits)
    return result


def _runs_before(finding: Finding) -> tuple[int, int]:
    """Where the fixed code ends, the order Python finishes it in: of two fixes that insert
    statements at one place, the one for a call nested in the other's arguments comes first
    (`loss = crit(model(x), y)`: `x`'s mark before `pred = model(x)`, which the outer fix binds),
    and keeps a line both insert. Insertions at different places keep their places."""
    loc = finding.location
    if loc.end_line is None or loc.end_col is None:
        return (loc.line, loc.col or 0)
    return (loc.end_line, loc.end_col)


def _without_repeated_lines(edits: list[Edit], kept: list[Edit]) -> list[Edit]:
    """``edits`` less the insertions an earlier fix makes at the same place already: the same
    text, or whole statements among its lines."""
    inserted: dict[int, set[str]] = {}
    whole: set[tuple[int, str]] = set()
    for edit in kept:
        if edit.start == edit.end:
            inserted.setdefault(edit.start, set()).update(edit.new_text.splitlines(keepends=True))
            whole.add((edit.start, edit.new_text))
    out = []
    for edit in edits:
        if edit.start == edit.end and (edit.start, edit.new_text) in whole:
            continue  # the same insertion (`, dynamic=True` into one compile call): once
        if edit.start != edit.end and any(e == replace(edit, rule=e.rule) for e in kept):
            continue  # the same replacement (`@torch.compile(dynamic=True)`): once
        there = inserted.get(edit.start) if edit.start == edit.end else None
        if there:
            lines = edit.new_text.splitlines(keepends=True)
            if all(_a_statement(line) for line in lines):
                text = "".join(line for line in lines if line not in there)
                if not text:
                    continue
                edit = replace(edit, new_text=text)
        out.append(edit)
    return out


# A mark on a tensor holds for the object: made once above in the same block, it need not be
# made again before the next call that passes the same tensor (two models fed one batch).
_MARK_LINE = re.compile(
    r"^(?P<indent>[ \t]*)[\w.]*\b(?:maybe_mark_dynamic|mark_dynamic|mark_unbacked)\((?P<name>[A-Za-z_]\w*)\b"
)


def _without_marks_made_above(edits: list[Edit], kept: list[Edit], text: str) -> list[Edit]:
    """``edits`` less the mark lines an earlier fix inserts above in the same block, where the code
    between rebinds nothing the mark names: a second `maybe_mark_dynamic(batch, 0)` before the
    second model's call."""
    marks = [(e.start, line) for e in kept if e.start == e.end for line in e.new_text.splitlines(keepends=True)]
    out = []
    for edit in edits:
        if edit.start != edit.end:
            out.append(edit)
            continue
        # What the fixes themselves write between (`x = torch.ones(4)`, the argument bound to a name).
        written = [e for e in (*kept, *edits) if e is not edit and not _MARK_LINE.match(e.new_text)]
        lines = edit.new_text.splitlines(keepends=True)
        kept_lines = [
            line
            for line in lines
            if not any(
                at < edit.start and line == made and _same_block(text, at, edit.start, line, written)
                for at, made in marks
            )
        ]
        if not kept_lines:
            continue
        out.append(edit if len(kept_lines) == len(lines) else replace(edit, new_text="".join(kept_lines)))
    return out


def _same_block(text: str, start: int, end: int, mark: str, written: list[Edit]) -> bool:
    """Is ``mark`` (a mark line) still in force at ``end`` when inserted at ``start``: every line
    between is in its block (indented as deep or deeper), and neither they nor what other edits
    write between rebind the name it marks?"""
    match = _MARK_LINE.match(mark)
    if match is None:
        return False
    name = match.group("name")
    if any(start <= e.start <= end and re.search(rf"\b{re.escape(name)}\b", e.new_text) for e in written):
        return False
    indent = len(match.group("indent"))
    between = text[start:end]
    for line in between.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and len(line) - len(line.lstrip()) < indent:
            return False
    try:
        tree = ast.parse("\n".join(line[indent:] for line in between.splitlines()))
    except SyntaxError:
        return False
    return not any(
        isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load) for node in ast.walk(tree)
    )


def _a_statement(line: str) -> bool:
    """A line that is a whole simple statement (a comment line is not one)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return False
    try:
        ast.parse(stripped)
    except SyntaxError:
        return False
    return True


def _fix(rule: Rule, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit] | str:
    """The rule's edits for ``finding``, or why it has none (an internal error)."""
    try:
        return rule.fix(finding, source, torch_name)
    except SourceError:
        raise  # the file does not parse (for the tree this fix reads): the whole file is skipped
    except Exception as exc:  # one broken fix must not lose the file's other fixes
        return f"internal error in {finding.rule}: {exc!r}"


def _import_edits(path: str, source: SourceFile, edits: list[Edit]) -> list[Edit]:
    if not edits:
        return []
    lines = []
    alias = source.fresh_torch_alias
    aliased = any(re.search(rf"(?<![\w.]){alias}\.", e.new_text) for e in edits)
    if source.torch_alias is None and (not aliased or any(_READS_TORCH.search(e.new_text) for e in edits)):
        lines.append("import torch")
    if aliased:
        lines.append(f"import torch as {alias}")
    if not lines:
        return []
    at = source.import_insertion_offset()
    prefix = "" if at == 0 or source.text[:at].endswith(("\n", "\r")) else "\n"
    text = prefix + "".join(line + "\n" for line in lines)
    return with_line_endings(source.text, [Edit(path, at, at, text, "import")])


_READS_TORCH = re.compile(r"(?<![\w.])torch\.")


def _proof(source: SourceFile, path: str, planned: list[tuple[Finding, FixEdits]]) -> str | None:
    edits = [e for _, fix in planned for e in fix.edits]
    edits[:0] = _import_edits(path, source, edits)
    if not edits:
        return None
    return prove(source.text, apply_edits(source.text, edits), edits, [fix for _, fix in planned])


def _proven(
    source: SourceFile, planned: list[tuple[Finding, FixEdits]], result: FileRewrite
) -> list[tuple[Finding, FixEdits]]:
    """The fixes whose text passes the proof: all of them (one proof, the usual case), else each
    fix proven alone, and the ones that pass proven together again (else the file gets none)."""
    why = _proof(source, result.path, planned)
    if why is None:
        return planned
    kept = []
    for finding, fix in planned:
        alone = why if len(planned) == 1 else _proof(source, result.path, [(finding, fix)])
        if alone is None:
            kept.append((finding, fix))
        else:
            result.skipped.append((finding, f"the fix fails its proof: {alone}"))
    if kept and len(kept) < len(planned):
        together = _proof(source, result.path, kept)
        if together is not None:
            result.skipped.extend((finding, f"the fixes fail their proof together: {together}") for finding, _ in kept)
            return []
    elif kept:  # each passes alone, not together
        result.skipped.extend((finding, f"the fixes fail their proof together: {why}") for finding, _ in kept)
        return []
    return kept


def _together(
    source: SourceFile, planned: list[tuple[Finding, FixEdits]], result: FileRewrite
) -> list[tuple[Finding, FixEdits]]:
    """Findings a rule fixes together (``params["together"]``: the calls of one function, each
    passing a value the same way) are all made or none is: one left out leaves out the rest."""
    held = {f.params.get("together") for f, _ in result.skipped} - {None}
    if not held:
        return planned
    kept = []
    for finding, fix in planned:
        if finding.params.get("together") in held:
            result.skipped.append((finding, "fixed together with another call whose fix is left out"))
        else:
            kept.append((finding, fix))
    if len(kept) < len(planned) and kept:
        why = _proof(source, result.path, kept)
        if why is not None:
            result.skipped.extend((finding, f"the fixes fail their proof together: {why}") for finding, _ in kept)
            return []
    return kept


def _anchor(source: SourceFile, finding: Finding, edits: list[Edit]) -> int | None:
    """Where the code a fix is about starts: the first span it replaces, else the Finding's
    location (a call, as the rule placed it)."""
    replaced = [e.start for e in edits if e.start != e.end]
    if replaced:
        return min(replaced)
    location = finding.location
    if location.col is None or not 0 < location.line <= len(source.lines):
        return None
    return source.offset(location.line, min(location.col, len(source.lines[location.line - 1])))
