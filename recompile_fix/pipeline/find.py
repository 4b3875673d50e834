"""The fix pipeline's first stage, ``find``: the Findings for the files under some paths of a
project, as every surface shows them (`apply`, `report`, `verify` and `fix` through ``run_apply``,
the language server).

* From the Profile, for the files whose bytes it saw (``_plan_from_profile``): evidence in files
  edited since profiling mapped onto them as they are now (``analysis.relocate``); a stale,
  already fixed, missing or unreadable file is reported in one line and left alone; a file
  outside the paths is context (``outside``).
* From the source, for the rules that need no Profile (``pipeline.scan``).
* Arbitrated (``merge_findings``: the Profile's Finding wins on its line, one block-compile
  strategy per frame), each file once under all its names, filtered by configuration (rules
  enabled, per-file-ignores) and suppression comments, in position order (``finding_order``).
* ``settle``d against the code as it is: a static Finding never contradicts the Profile's facts,
  and one whose fix the code already holds is not pending (``present``).

Every stage reads a file through one reader (``_Files``): the editor's buffer where the
language server passes one (``texts``), else the bytes on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.relocate import relocate
from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.config import Config, load_config
from recompile_fix.edits.rewrite import FileRewrite
from recompile_fix.findings.arbitration import arbitrate
from recompile_fix.findings.finding import Finding, Safety, stands_in_for
from recompile_fix.findings.plan import plan
from recompile_fix.findings.releases import profiled_torch
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.memo import DerivedCache
from recompile_fix.pipeline.paths import discover, inside, is_source, real_file
from recompile_fix.pipeline.scan import StaticScan, content_digest
from recompile_fix.pipeline.training import TrainingInProject
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.kept_sources import kept_source
from recompile_fix.profile.libraries import Interpreter
from recompile_fix.profile.model import Profile, resolve, same_as_profiled, sha256_bytes
from recompile_fix.profile.validate import check_against_sources, check_agreement
from recompile_fix.suppression import can_suppress, is_suppressed

__all__ = [
    "ApplyResult",
    "find",
    "finding_order",
    "merge_findings",
    "settle",
    "settle_in",
    "stale_message",
]


@dataclass
class ApplyResult:
    """What the pipeline found (``find``) and, once ``run_apply`` is done, rewrote."""

    findings: list[Finding] = field(default_factory=list)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    already_applied: list[str] = field(default_factory=list)
    applied_findings: list[Finding] = field(default_factory=list)  # the Profile's, whose fixes those files hold
    outside: list[Finding] = field(default_factory=list)
    files_parsed: int = 0  # files the static scan had to parse (cache misses)
    present: list[tuple[Finding, str]] = field(default_factory=list)  # (finding, where its fix already is)
    stale: dict[str, str] = field(default_factory=dict)  # path -> what changed since it was profiled
    # One line per frame whose own code changed since profiling (also among the errors): shown
    # as recorded, with no fix.
    stale_frames: list[str] = field(default_factory=list)
    # path -> content digest of the bytes its Findings were planned from: a file rewritten from
    # other bytes (another run wrote it meanwhile) is left alone.
    planned_from: dict[str, str] = field(default_factory=dict)
    # path -> the file as planning parsed it: rewriting the same bytes reuses its trees.
    parsed: dict[str, SourceFile] = field(default_factory=dict)
    # The Profile the Findings came from: its evidence in files edited since profiling mapped
    # onto them as they are now (analysis.relocate).
    profile: Profile | None = None
    # What this run derived from the files' bytes, for the next run (save it once done with it).
    memo: DerivedCache | None = None

    @property
    def pending(self) -> list[Finding]:
        return [f for r in self.rewrites for f in r.applied]


def find(
    paths: list[str],
    profile: Profile | None,
    rules: tuple[Rule, ...],
    *,
    root: Path,
    config: Config,
    jobs: int | None = None,
    use_cache: bool = True,
    texts: Mapping[str, str] | None = None,
    profile_path: Path | None = None,
    read_derived: bool | None = None,
) -> ApplyResult:
    """The Findings under ``paths`` of ``root`` (``findings``), with the per-file errors; nothing
    is rewritten yet. ``texts``: a file's text where it is not the one on disk (an editor's
    buffers, saved or not), by its path relative to ``root``: every stage reads it instead.
    ``profile_path``: where the Profile was read from (its profiled texts are kept beside it),
    if not where the configuration says. ``read_derived``: read the derived cache (what earlier runs
    found over the same bytes; saved only by ``result.memo.save()``), by default where
    ``use_cache``: an editor reads it, and keeps what it found only over saved files
    (lsp/engine.py). The edits' torch release is the
    Profile's where there is one: the tree runs on that torch, whatever `python` on PATH is now."""
    with profiled_torch(profile.torch_version if profile is not None else None):
        rules = tuple(r for r in rules if config.rule_enabled(r.id))
        files = _Files(root, texts)
        roots = []
        for p in paths:
            resolved = Path(p).resolve()
            if not resolved.exists() and os.path.relpath(resolved, root) not in files.texts:
                raise SourceError(f"{p}: no such file or directory")
            if not inside(resolved, [root]):
                raise SourceError(f"{p}: outside the project ({root}); run from the project root")
            roots.append(resolved)
        result = ApplyResult(memo=DerivedCache(root, enabled=use_cache if read_derived is None else read_derived))
        profiled: list[Finding] = []
        if profile is not None:  # evidence in files edited since profiling, where its code is now
            check_agreement(profile)  # as read: the mapped copy's lines differ from torch's texts
            profile, stale_frames = relocate(profile, root, profile_path or Path(root, config.profile), texts)
            result.errors.extend(stale_frames)
            result.stale_frames = stale_frames
            result.profile = profile
            kept = profile_path or Path(root, config.profile)
            profiled = _plan_from_profile(profile, rules, root, roots, result, config, files, kept)
        scan = StaticScan(root, rules, config.fingerprint(), jobs=jobs, use_cache=use_cache)
        unsaved = [r for r in roots if not r.exists() and is_source(r)]  # a buffer not saved yet
        walks: dict[Path, list[Path]] = {}  # the scan's folders: the training search walks them once
        static = scan.run(discover(paths, root, config.excluded, walks) + unsaved, texts=texts)
        if profile is not None:  # the Profile names the torch that runs this tree: its release gates the edits
            for finding in static:
                finding.torch_version = finding.torch_version or profile.torch_version
        result.errors.extend(scan.errors)
        result.files_parsed = scan.parsed
        for finding in static:
            digest = scan.digests.get(finding.file)
            if digest is not None:
                result.planned_from.setdefault(finding.file, digest)
                if result.planned_from[finding.file] != digest:
                    result.planned_from[finding.file] = "changed"  # two reads, two contents: fix neither
        merged = _one_per_file(merge_findings(profiled, static, config), root)
        suppressed = [f for f in merged if is_suppressed(files.suppression_line(f.file, f.location.line), f.rule)]
        # A fallback goes with its preferred fix: a suppression comment on the optimizer declines the rule's
        # fix of those recompiles, not only the tensor lr written there.
        findings = [
            f for f in merged if all(f is not s and not (f.fallback and stands_in_for(f, s)) for s in suppressed)
        ]
        result.findings, result.present = settle(
            findings,
            rules,
            profile=profile,
            source_of=files.source,
            memo=result.memo,
            training=TrainingInProject(root, config.excluded, files, scan.training_facts, walks),
        )
        result.present += [(f, "written since the Profile ran") for f in result.applied_findings]
        return result


def settle_in(
    root: str | os.PathLike[str], findings: list[Finding], rules: tuple[Rule, ...], profile: Profile | None
) -> tuple[list[Finding], list[tuple[Finding, str]]]:
    """``settle`` against the files as they are under ``root``."""
    files = _Files(Path(root))
    training = TrainingInProject(Path(root), load_config(Path(root)).excluded, files)
    return settle(findings, rules, profile=profile, source_of=files.source, training=training)


def settle(
    findings: list[Finding],
    rules: tuple[Rule, ...],
    *,
    profile: Profile | None,
    source_of: Callable[[str], SourceFile | None],
    memo: DerivedCache | None = None,
    training: TrainingInProject | None = None,
) -> tuple[list[Finding], list[tuple[Finding, str]]]:
    """The Findings still pending in the code as it is, and (finding, where) for those whose fix
    is already there. Static Findings first take in the Profile's facts, every Finding the
    project's (``training``: the files of the project that run a backward pass). ``memo``: answers kept from an earlier run over the same bytes (``already_present``
    may parse the file)."""
    by_id = {rule.id: rule for rule in rules}
    pending: list[Finding] = []
    present: list[tuple[Finding, str]] = []
    for finding in findings:
        rule = by_id.get(finding.rule)
        source = source_of(finding.file) if rule is not None else None
        if rule is None or source is None:
            pending.append(finding)
            continue
        where = None
        try:
            if profile is not None and finding.confidence == "static":
                honoured = rule.honour_facts(finding, profile, source)
                if honoured is None:
                    continue  # the run showed there is nothing to fix
                finding = honoured
            if training is not None:
                backend = profile.backend if profile is not None else None
                finding = _honour_training(rule, finding, source, training, memo, backend)
            where = _already_present(rule, finding, source, memo) if finding.fixable else None
        except Exception:  # noqa: BLE001 - a file that does not parse, a rule that cannot tell
            where = None
        if where:
            present.append((finding, where))
        else:
            pending.append(finding)
    return pending, present


def _honour_training(
    rule: Rule,
    finding: Finding,
    source: SourceFile,
    training: "TrainingInProject",
    memo: DerivedCache | None,
    backend: str | None,
) -> Finding:
    """``rule.honour_training``, from ``memo`` where it answered for these bytes and this training
    file before (a rule may re-plan the file: a warm run parses nothing)."""
    asked: list[str | None] = []

    def where() -> str | None:
        if not asked:
            asked.append(training.of(finding.file))
        return asked[0]

    if type(rule).honour_training is Rule.honour_training or where() is None:
        return finding  # no training file imports it: nothing to honour
    inputs = [finding.to_json(), where(), backend]
    known = memo.get("training", finding.file, source.text, inputs) if memo is not None else None
    if known is not None:
        return Finding.from_json(known)
    honoured = rule.honour_training(finding, source, where, backend)
    if memo is not None:
        memo.put("training", finding.file, source.text, inputs, honoured.to_json())
    return honoured


def _already_present(rule: Rule, finding: Finding, source: SourceFile, memo: DerivedCache | None) -> str | None:
    """``rule.already_present``, narrowing ``finding`` as it does; from ``memo`` when it knows."""
    asked = finding.to_json()
    known = memo.get("present", finding.file, source.text, asked) if memo is not None else None
    if known is not None:
        finding.params = known["params"]
        return known["where"]  # type: ignore[no-any-return]
    where = rule.already_present(finding, source)
    if memo is not None:
        memo.put("present", finding.file, source.text, asked, {"where": where, "params": finding.params})
    return where


def merge_findings(profiled: list[Finding], static: list[Finding], config: Config | None = None) -> list[Finding]:
    """The Profile's Findings, then the static ones on no (rule, file, line) the Profile covers;
    those the configuration enables for their file, one fix kept of two that claim the same thing
    (``findings.arbitration``); in position order."""
    from recompile_fix.rules import ALL_RULES

    seen = {(f.rule, f.file, f.location.line) for f in profiled}
    merged = profiled + [f for f in static if (f.rule, f.file, f.location.line) not in seen]
    if config is not None:
        merged = [f for f in merged if config.rule_enabled(f.rule, f.file)]
    return sorted(arbitrate(merged, ALL_RULES), key=finding_order)


def _one_per_file(findings: list[Finding], root: Path) -> list[Finding]:
    """Each Finding once per file, however many names the file has: a symbolic link inside the
    project to a file inside it is scanned under both names (and run under either). Under the
    file's own name (else the first name) every Finding is kept; under another name, those at a
    place the file's own name has no Finding of that rule at."""
    reals = {path: real_file(path, root) for path in {f.file for f in findings}}
    names: dict[Path, list[str]] = {}
    for finding in findings:
        real = names.setdefault(reals[finding.file], [])
        if finding.file not in real:
            real.append(finding.file)
    if all(len(aliases) == 1 for aliases in names.values()):
        return findings
    canonical = {
        real: next((n for n in aliases if not resolve(n, root).is_symlink()), aliases[0])
        for real, aliases in names.items()
    }
    own = {(f.file, f.rule, f.location.line, f.location.col) for f in findings if canonical[reals[f.file]] == f.file}
    kept = []
    for finding in findings:
        name = canonical[reals[finding.file]]
        if name != finding.file and (name, finding.rule, finding.location.line, finding.location.col) in own:
            continue
        kept.append(finding)
    return kept


def finding_order(finding: Finding) -> tuple[str, int, int, str]:
    return (finding.file, finding.location.line, finding.location.col or 0, finding.rule)


def _plan_from_profile(
    profile: Profile,
    rules: tuple[Rule, ...],
    root_dir: Path,
    roots: list[Path],
    result: ApplyResult,
    config: Config,
    files: _Files,
    profile_file: Path,
) -> list[Finding]:
    """Findings from the Profile for files whose bytes it saw; errors for the rest.

    A file outside ``paths``, or excluded (torch's own, site-packages, a virtualenv), is context:
    its Findings go to ``result.outside``, never to the errors, and it is not even read (a
    checkout without the profiled virtualenv has none of torch's files)."""

    def read(path: str) -> bytes:
        return files.read(path, profile.interpreter)

    check_against_sources(profile, files.reader_or_none(profile.interpreter), root_dir, agreement=False)
    reader = _as_profiled(profile, profile_file, read)
    project = Project(root_dir, expected_hashes=profile.sources, interpreter=profile.interpreter, read=reader)
    status: dict[str, str] = {}  # path -> ok / applied / stale / outside / missing / unreadable

    def file_status(path: str) -> str:
        if path not in status:
            file = resolve(path, root_dir, profile.interpreter)
            if not inside(file, roots) or config.excluded(os.path.relpath(file.resolve(), root_dir)):
                status[path] = "outside"
                return status[path]
            try:
                data = read(path)
            except FileNotFoundError:
                status[path] = "missing"
                return status[path]
            except OSError:
                status[path] = "unreadable"
                return status[path]
            result.planned_from[path] = content_digest(data)
            if profile.applied.get(path) == sha256_bytes(data):
                status[path] = "applied"
            elif not same_as_profiled(data, profile.sources.get(path)):
                status[path] = "stale"
            else:
                status[path] = "ok"
        return status[path]

    def error_once(path: str, message: str) -> None:
        if not any(e.startswith(path + ":") for e in result.errors):
            result.errors.append(f"{path}: {message}")

    def error_for(path: str) -> None:
        state = file_status(path)
        if state == "stale":
            error_once(
                path, "changed since it was profiled (stale Profile); run `recompile-fix profile` again; not changed"
            )
        elif state == "missing":
            error_once(path, "no such file, but the Profile names it (moved or deleted since profiling?); not changed")
        elif state == "unreadable":
            error_once(path, "cannot be read; not changed")

    planned = []
    for finding in _plan_remembered(profile, project, rules, result.memo):
        state = file_status(finding.file)
        if state == "applied" and finding.fixable:
            # Its fix is what the file holds now: to `report`'s accounting, a fix the Profile predates.
            result.applied_findings.append(finding)
            continue
        if state == "applied" or (state in ("outside", "missing", "unreadable") and finding.safety is Safety.NONE):
            continue  # nothing to say about a file we already fixed, or one we were not asked about
        if state == "stale":
            result.stale.setdefault(finding.file, _what_changed(finding.file, profile))
            continue
        if state == "outside":
            link = resolve(finding.file, root_dir)
            if link.is_symlink() and inside(link.parent, roots) and not inside(link, [root_dir]):
                # The link is in PATHS, the file it names is not in the project: say so.
                error_once(finding.file, f"a symbolic link to {link.resolve()}, outside the project; not changed")
                continue
            result.outside.append(finding)  # context: reported, never an error, never edited
            continue
        if state != "ok":
            error_for(finding.file)
            continue
        planned.append(finding)
    for path, why in sorted(project.errors.items()):
        state = file_status(path)
        if state == "outside":
            continue  # a rule read torch's source for context; a checkout may not have it
        if state in ("missing", "unreadable"):
            error_for(path)
        elif not any(e.startswith(path + ":") for e in result.errors):
            result.errors.append(why)
    result.already_applied = sorted(p for p, s in status.items() if s == "applied")
    result.parsed = project.parsed()
    return planned


def _as_profiled(profile: Profile, profile_file: Path, read: Callable[[str], bytes]) -> Callable[[str], bytes]:
    """``read``, but a file `apply` wrote since the run gives the text the run had (kept beside the
    Profile): the rules plan on it, and its Findings are the fixes it now holds, for `report`'s
    accounting of the Profile's recompiles."""

    def read_as_profiled(path: str) -> bytes:
        data = read(path)
        digest = profile.sources.get(path)
        if digest is not None and profile.applied.get(path) == sha256_bytes(data):
            try:
                return kept_source(profile_file, digest).read_bytes()
            except OSError:
                return data
        return data

    return read_as_profiled


def _plan_remembered(
    profile: Profile, project: Project, rules: tuple[Rule, ...], memo: DerivedCache | None
) -> list[Finding]:
    """``plan``, or what it found in an earlier run over the same Profile (as relocated onto the
    files now), the same rules and tool, when every file the rules read then has the same bytes
    now (``Project.reads``): a warm `report` or `apply --check` parses nothing."""
    if memo is None or not memo.enabled:
        return plan(profile, project, rules)
    import json

    key = json.dumps(profile.to_json(), sort_keys=True, default=str)
    inputs = {"rules": [rule.id for rule in rules]}
    known = memo.get("plan", _PLAN_KEY, key, inputs)
    if isinstance(known, dict):
        reads = {(mode, path): digest for mode, path, digest in known.get("reads", [])}
        if project.unchanged(reads):
            project.errors.update(known.get("errors", {}))
            project.stale.update(known.get("stale", []))
            return [Finding.from_json(f) for f in known.get("findings", [])]
    findings = plan(profile, project, rules)
    value = {
        "reads": [[mode, path, digest] for (mode, path), digest in project.reads.items()],
        "errors": dict(project.errors),
        "stale": sorted(project.stale),
        "findings": [f.to_json() for f in findings],
    }
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return findings  # something a rule keeps is not JSON: not remembered
    memo.put("plan", _PLAN_KEY, key, inputs, value)
    return findings


_PLAN_KEY = "<the Profile's plan>"  # the derived cache's "file" for it (entries are per file)


def _what_changed(path: str, profile: Profile) -> str:
    if path in profile.applied:
        return "its bytes are neither the ones the Profile hashed nor the ones `apply` wrote: edited since"
    return "its bytes are not the ones the Profile hashed"


def stale_message(path: str, what: str, changed: bool) -> str:
    """The stale-Profile line for ``path``, true to the diff: whether the fixes that need no
    Profile still changed the file."""
    done = "only the fixes that need no Profile were made" if changed else "not changed"
    return (
        f"{path}: changed since it was profiled ({what}): stale Profile, its fixes for this file were "
        f"skipped; run `recompile-fix profile` again; {done}"
    )


class _Files:
    """The project's files as one run of ``find`` reads them: an editor's buffer where ``texts``
    has one, else the bytes on disk. Each file's source and lines are read once; a source is
    parsed only when a rule asks; None or no lines when it cannot be read."""

    def __init__(self, root: Path, texts: Mapping[str, str] | None = None):
        self.root = root
        self.texts: Mapping[str, str] = texts or {}
        self._sources: dict[str, SourceFile | None] = {}
        self._lines: dict[str, list[str]] = {}
        self._bytes: dict[str, bytes] = {}

    def read(self, path: str, interpreter: Interpreter | None = None) -> bytes:
        """The file's bytes (``interpreter``: where the Profile's library files are)."""
        if path in self.texts:
            return self.texts[path].encode("utf-8")
        if interpreter is not None:
            return read_named_file(path, self.root, interpreter)
        if path not in self._bytes:  # suppression comments, then settle: one read
            self._bytes[path] = read_named_file(path, self.root)
        return self._bytes[path]

    def peek(self, path: str) -> bytes:
        """The file's bytes, not kept (a search over the whole project)."""
        if path in self.texts:
            return self.texts[path].encode("utf-8")
        return self._bytes[path] if path in self._bytes else read_named_file(path, self.root)

    def reader_or_none(self, interpreter: Interpreter | None) -> Callable[[str], bytes | None]:
        def read_or_none(path: str) -> bytes | None:
            try:
                return self.read(path, interpreter)
            except OSError:
                return None

        return read_or_none

    def source(self, path: str) -> SourceFile | None:
        if path not in self._sources:
            try:
                self._sources[path] = SourceFile.read(Path(path), self.read(path), parse=False)
            except (OSError, SourceError):
                self._sources[path] = None
        return self._sources[path]

    def suppression_line(self, path: str, number: int) -> str:
        """One line, for its suppression comment ("" past the end, unreadable, or in a file that
        holds no such comment)."""
        if path not in self._lines:
            try:
                data = self.read(path)
                self._lines[path] = data.decode("utf-8").splitlines() if can_suppress(data) else []
            except (OSError, UnicodeDecodeError):
                self._lines[path] = []
        lines = self._lines[path]
        return lines[number - 1] if 0 < number <= len(lines) else ""
