"""The fix pipeline: the one path from a Profile to written files, which every surface calls
(`apply` and the pre-commit hooks that run it, `apply --verify`, `verify`, the language server).

    Profile + configuration --find--> Findings --select_fixes--> fixes
        --rewrite_files--> one FileRewrite per file --write_rewrites--> files (or diff_text)

* ``find``: Findings from the Profile for the files whose bytes it saw (a stale, already fixed
  or unreadable file is reported in one line and left alone), and from the source for the
  rules that need no Profile; merged (``merge_findings``), filtered by configuration and
  suppression comments, in position order (``finding_order``).
* ``settle``: each Finding against the code as it is and the Profile's facts: a static Finding
  never contradicts what the Profile established (``Rule.honour_facts``: the program trains),
  and a Finding whose fix the code already holds (``Rule.already_present``: the tool's own edit
  from an earlier round, or a hand-written equivalent) is not pending, so it is never made twice.
* ``select_fixes``: the Findings whose fix is made: safe ones, and unsafe ones when asked.
* ``rewrite_files``: each file's fixes as one rewrite; a file that cannot be read or parsed, or
  whose fixes crash, is reported and never loses another file's work.
* ``write_rewrites``: atomic writes, each remembered in the Profile (``applied``), so a second
  apply changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.relocate import relocate
from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.config import Config
from recompile_fix.edits.edit import Edit, apply_edits, unified_diff
from recompile_fix.edits.format import configured_line_length
from recompile_fix.edits.rewrite import FileRewrite, rewrite
from recompile_fix.findings.arbitration import arbitrate
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.plan import plan
from recompile_fix.findings.releases import installed_torch_version
from recompile_fix.findings.rule import Rule
from recompile_fix.notebook import Notebook, NotebookError, cell_diffs, is_notebook
from recompile_fix.pipeline.lock import project_lock
from recompile_fix.pipeline.memo import DerivedCache
from recompile_fix.pipeline.scan import StaticScan, content_digest, discover
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.model import Profile, resolve, same_as_profiled, sha256_bytes
from recompile_fix.profile.validate import check_against_sources
from recompile_fix.suppression import is_suppressed

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the comparisons at write time still hold
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "ApplyResult",
    "FindingFix",
    "clean_stale_temps",
    "diff_text",
    "find",
    "finding_fixes",
    "finding_order",
    "is_selected",
    "merge_findings",
    "rewrite_files",
    "run_apply",
    "select_fixes",
    "settle",
    "settle_in",
    "clean_stale_temps",
    "write_rewrites",
]


@dataclass
class ApplyResult:
    findings: list[Finding] = field(default_factory=list)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    already_applied: list[str] = field(default_factory=list)
    outside: list[Finding] = field(default_factory=list)
    files_parsed: int = 0  # files the static scan had to parse (cache misses)
    present: list[tuple[Finding, str]] = field(default_factory=list)  # (finding, where its fix already is)
    stale: dict[str, str] = field(default_factory=dict)  # path -> what changed since it was profiled
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


def run_apply(
    paths: list[str],
    profile: Profile | None,
    rules: tuple[Rule, ...],
    *,
    root: str | None = None,
    unsafe_fixes: bool = False,
    write: bool = True,
    config: Config | None = None,
    jobs: int | None = None,
    use_cache: bool = True,
) -> ApplyResult:
    """The whole pipeline: find, select, rewrite, and write unless asked not to."""
    root_dir = Path(root or os.getcwd()).resolve()
    config = config or Config(root=root_dir)
    # A writing run holds the project's lock from reading the files to writing them.
    with project_lock(root_dir) if write else contextlib.nullcontext():
        result = find(paths, profile, rules, root=root_dir, config=config, jobs=jobs, use_cache=use_cache)
        rewrites, failed = rewrite_files(
            root_dir,
            select_fixes(result.findings, unsafe_fixes=unsafe_fixes),
            rules,
            result.planned_from,
            result.parsed,
            memo=result.memo,
        )
        skipped = [
            (r.path, f"{r.path}:{finding.location.line}: {finding.rule} not applied: {why}")
            for r in rewrites
            for finding, why in r.skipped
        ]
        changed = {r.path for r in rewrites if r.changed}
        stale = [(path, _stale_message(path, what, path in changed)) for path, what in result.stale.items()]
        result.rewrites = [r for r in rewrites if r.changed]
        if write:
            # What a run killed before its rename left beside the files this run read.
            clean_stale_temps({_real(path, root_dir).parent for path in result.planned_from})
            unwritten = write_rewrites(root_dir, result.rewrites, profile)
            failed.extend((r.path, why) for r, why in unwritten)
            result.rewrites = [r for r in result.rewrites if all(r is not u for u, _ in unwritten)]
    result.errors.extend(message for _, message in sorted(stale + failed + skipped, key=lambda item: item[0]))
    return result


# -- find ------------------------------------------------------------------------------------


def find(
    paths: list[str],
    profile: Profile | None,
    rules: tuple[Rule, ...],
    *,
    root: Path,
    config: Config,
    jobs: int | None = None,
    use_cache: bool = True,
) -> ApplyResult:
    """The Findings under ``paths`` of ``root`` (``findings``), with the per-file errors; nothing
    is rewritten yet."""
    rules = tuple(r for r in rules if config.rule_enabled(r.id))
    roots = []
    for p in paths:
        resolved = Path(p).resolve()
        if not resolved.exists():
            raise SourceError(f"{p}: no such file or directory")
        if not _inside(resolved, [root]):
            raise SourceError(f"{p}: outside the project ({root}); run from the project root")
        roots.append(resolved)
    result = ApplyResult(memo=DerivedCache(root, enabled=use_cache))
    profiled: list[Finding] = []
    if profile is not None:  # evidence in files edited since profiling, where its code is now
        profile, stale_frames = relocate(profile, root, Path(root, config.profile))
        result.errors.extend(stale_frames)
        result.profile = profile
        profiled = _plan_from_profile(profile, rules, root, roots, paths, result, config)
    scan = StaticScan(root, rules, config.fingerprint(), jobs=jobs, use_cache=use_cache)
    static = scan.run(discover(paths, root, config.excluded))
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
    lines = _LineReader(root)
    findings = [
        finding
        for finding in _one_per_file(merge_findings(profiled, static, config), root)
        if not is_suppressed(lines.line(finding.file, finding.location.line), finding.rule)
    ]
    result.findings, result.present = settle(
        findings, rules, profile=profile, source_of=_SourceReader(root).source, memo=result.memo
    )
    return result


def settle_in(
    root: str | os.PathLike[str], findings: list[Finding], rules: tuple[Rule, ...], profile: Profile | None
) -> tuple[list[Finding], list[tuple[Finding, str]]]:
    """``settle`` against the files as they are under ``root``."""
    return settle(findings, rules, profile=profile, source_of=_SourceReader(Path(root)).source)


def settle(
    findings: list[Finding],
    rules: tuple[Rule, ...],
    *,
    profile: Profile | None,
    source_of: Callable[[str], SourceFile | None],
    memo: DerivedCache | None = None,
) -> tuple[list[Finding], list[tuple[Finding, str]]]:
    """The Findings still pending in the code as it is, and (finding, where) for those whose fix
    is already there. Static Findings first take in the Profile's facts. ``memo``: answers kept
    from an earlier run over the same bytes (``already_present`` may parse the file)."""
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
                finding = rule.honour_facts(finding, profile, source)
            where = _already_present(rule, finding, source, memo) if finding.fixable else None
        except Exception:  # noqa: BLE001 - a file that does not parse, a rule that cannot tell
            where = None
        if where:
            present.append((finding, where))
        else:
            pending.append(finding)
    return pending, present


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
    reals = {path: _real(path, root) for path in {f.file for f in findings}}
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


def _inside(path: Path, roots: list[Path]) -> bool:
    path = path.resolve()
    return any(path == root or root in path.parents for root in roots)


def _plan_from_profile(
    profile: Profile,
    rules: tuple[Rule, ...],
    root_dir: Path,
    roots: list[Path],
    paths: list[str],
    result: ApplyResult,
    config: Config | None = None,
) -> list[Finding]:
    """Findings from the Profile for files whose bytes it saw; errors for the rest.

    A file outside ``paths``, or excluded (torch's own, site-packages, a virtualenv), is context:
    its Findings go to ``result.outside``, never to the errors, and it is not even read (a
    checkout without the profiled virtualenv has none of torch's files)."""
    check_against_sources(profile, lambda path: _read_or_none(path, root_dir, profile), root_dir)
    project = Project(root_dir, expected_hashes=profile.sources, interpreter=profile.interpreter)
    status: dict[str, str] = {}  # path -> ok / applied / stale / outside / missing / unreadable

    def file_status(path: str) -> str:
        if path not in status:
            file = resolve(path, root_dir, profile.interpreter)
            if not _inside(file, roots) or (
                config is not None and config.excluded(os.path.relpath(file.resolve(), root_dir))
            ):
                status[path] = "outside"
                return status[path]
            try:
                data = read_named_file(path, root_dir, profile.interpreter)
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
    for finding in plan(profile, project, rules):
        state = file_status(finding.file)
        if state == "applied" or (state in ("outside", "missing", "unreadable") and finding.safety is Safety.NONE):
            continue  # nothing to say about a file we already fixed, or one we were not asked about
        if state == "stale":
            result.stale.setdefault(finding.file, _what_changed(finding.file, profile))
            continue
        if state == "outside":
            link = resolve(finding.file, root_dir)
            if link.is_symlink() and _inside(link.parent, roots) and not _inside(link, [root_dir]):
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


def _what_changed(path: str, profile: Profile) -> str:
    if path in profile.applied:
        return "its bytes are neither the ones the Profile hashed nor the ones `apply` wrote: edited since"
    return "its bytes are not the ones the Profile hashed"


def _stale_message(path: str, what: str, changed: bool) -> str:
    """The stale-Profile line for ``path``, true to the diff: whether the fixes that need no
    Profile still changed the file."""
    done = "only the fixes that need no Profile were made" if changed else "not changed"
    return (
        f"{path}: changed since it was profiled ({what}): stale Profile, its fixes for this file were "
        f"skipped; run `recompile-fix profile` again; {done}"
    )


class _SourceReader:
    """Each file's text as it is on disk, parsed only when a rule asks; None when unreadable."""

    def __init__(self, root: Path):
        self.root = root
        self._sources: dict[str, SourceFile | None] = {}

    def source(self, path: str) -> SourceFile | None:
        if path not in self._sources:
            try:
                self._sources[path] = SourceFile.read(Path(path), read_named_file(path, self.root), parse=False)
            except (OSError, SourceError):
                self._sources[path] = None
        return self._sources[path]


def _read_or_none(path: str, root: Path, profile: Profile) -> bytes | None:
    try:
        return read_named_file(path, root, profile.interpreter)
    except OSError:
        return None


class _LineReader:
    """One line of a file, for suppression comments; each file read once."""

    def __init__(self, root: Path):
        self.root = root
        self._lines: dict[str, list[str]] = {}

    def line(self, path: str, number: int) -> str:
        if path not in self._lines:
            try:
                self._lines[path] = read_named_file(path, self.root).decode("utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._lines[path] = []
        lines = self._lines[path]
        return lines[number - 1] if 0 < number <= len(lines) else ""


# -- select ----------------------------------------------------------------------------------


def is_selected(finding: Finding, *, unsafe_fixes: bool) -> bool:
    """Is this Finding's fix made? Safe fixes always; unsafe ones only when asked (never in an
    editor's fix-all); a Finding with no fix never."""
    return finding.safety is Safety.SAFE or (finding.safety is Safety.UNSAFE and unsafe_fixes)


def select_fixes(findings: Iterable[Finding], *, unsafe_fixes: bool) -> list[Finding]:
    return [f for f in findings if is_selected(f, unsafe_fixes=unsafe_fixes)]


# -- rewrite ---------------------------------------------------------------------------------


def rewrite_files(
    root: Path,
    fixes: list[Finding],
    rules: tuple[Rule, ...],
    planned_from: dict[str, str] | None = None,
    parsed: dict[str, SourceFile] | None = None,
    memo: DerivedCache | None = None,
) -> tuple[list[FileRewrite], list[tuple[str, str]]]:
    """Each file's fixes as one rewrite of its text on disk under ``root`` (unchanged ones
    included: their ``skipped`` fixes say why), and (path, why) for each file that could not be
    rewritten. ``planned_from``: the content digest each file's Findings were planned from; a
    file whose bytes are others now is not rewritten (positions would not hold). ``parsed``: files
    as planning parsed them, reused when their bytes are still these."""
    by_rule = {rule.id: rule for rule in rules}
    # One rewrite per file, named as its first Finding names it: a file that is also reached
    # through a symbolic link is rewritten once, with the fixes found under either name.
    names: dict[Path, str] = {}
    reals = {path: _real(path, root) for path in {f.file for f in fixes}}
    by_file: dict[str, list[Finding]] = {}
    for finding in fixes:
        name = names.setdefault(reals[finding.file], finding.file)
        by_file.setdefault(name, []).append(finding)
    rewrites: list[FileRewrite] = []
    failed: list[tuple[str, str]] = []
    for path, file_fixes in sorted(by_file.items()):
        try:
            data = read_named_file(path, root)
            if planned_from is not None and planned_from.get(path, content_digest(data)) != content_digest(data):
                failed.append((path, f"{path}: {_CHANGED_MEANWHILE}"))
                continue
            source = (parsed or {}).get(path)
            if source is None or source.text.encode("utf-8") != data:
                # Each fix parses what it needs (most need libcst, RF004's only the ast tree).
                source = SourceFile.read(Path(path), data, parse=False)
            rewrites.append(_rewrite_memo(path, source, file_fixes, by_rule, root, memo))
        except SourceError as exc:
            failed.append((path, str(exc)))
        except OSError as exc:
            failed.append((path, f"{path}: cannot read: {exc.strerror}"))
        except Exception as exc:  # a crash in one file never loses another file's work
            failed.append((path, f"{path}: internal error, not changed: {exc!r}"))
    return rewrites, failed


def _rewrite_memo(
    path: str,
    source: SourceFile,
    findings: list[Finding],
    rules: dict[str, Rule],
    root: Path,
    memo: DerivedCache | None,
) -> FileRewrite:
    """``rewrite``, or what it gave on an earlier run over the same bytes and Findings (it
    depends also on the project's line length and, in static mode, the installed torch)."""
    asked = None
    if memo is not None:
        asked = {
            "findings": [f.to_json() for f in findings],
            "line_length": configured_line_length(Path(root, source.path)),
            "torch": installed_torch_version(root),
        }
        known = memo.get("rewrite", path, source.text, asked)
        if known is not None:
            edits = [Edit(path, start, end, new_text, rule) for start, end, new_text, rule in known["edits"]]
            return FileRewrite(
                path=path,
                before=source.text,
                after=apply_edits(source.text, edits),
                edits=edits,
                applied=[findings[i] for i in known["applied"]],
                skipped=[(findings[i], why) for i, why in known["skipped"]],
            )
    source.syntax  # noqa: B018 -- a file that does not parse fails here, before any fix
    made = rewrite(path, source, findings, rules, root=root)
    index = {id(f): i for i, f in enumerate(findings)}
    if memo is not None and all(id(f) in index for f in [*made.applied, *(f for f, _ in made.skipped)]):
        memo.put(
            "rewrite",
            path,
            source.text,
            asked,
            {
                "edits": [[e.start, e.end, e.new_text, e.rule] for e in made.edits],
                "applied": [index[id(f)] for f in made.applied],
                "skipped": [[index[id(f)], why] for f, why in made.skipped],
            },
        )
    return made


@dataclass
class FindingFix:
    """One Finding's fix on its own, as ruff reports each fix: the Edits that make it (``import
    torch`` included where the file lacks it), in character offsets of ``text``."""

    text: str
    edits: list[Edit]


def finding_fixes(
    root: Path, findings: list[Finding], rules: tuple[Rule, ...], memo: DerivedCache | None = None
) -> list[FindingFix | None]:
    """Each Finding's own fix (None: no fix, or the file cannot be read or parsed), for the
    machine-readable outputs; what `apply` writes is all of a file's fixes together."""
    by_rule = {rule.id: rule for rule in rules}
    sources: dict[str, SourceFile | None] = {}
    fixes: list[FindingFix | None] = []
    for finding in findings:
        if not finding.fixable or finding.rule not in by_rule:
            fixes.append(None)
            continue
        if finding.file not in sources:
            try:
                data = read_named_file(finding.file, root)
                sources[finding.file] = SourceFile.read(Path(finding.file), data, parse=False)
            except (OSError, SourceError):
                sources[finding.file] = None
        source = sources[finding.file]
        try:
            made = _rewrite_memo(finding.file, source, [finding], by_rule, root, memo) if source is not None else None
        except SourceError:
            made = None
        fixes.append(FindingFix(made.before, made.edits) if made is not None and made.applied else None)
    return fixes


# -- write -----------------------------------------------------------------------------------


_CHANGED_MEANWHILE = "changed while it was being fixed (another run at the same time?); not changed"


def write_rewrites(
    root: Path, rewrites: list[FileRewrite], profile: Profile | None = None
) -> list[tuple[FileRewrite, str]]:
    """Write each changed file atomically, under the project's lock, only if its bytes are still
    the ones rewritten (compare and swap); the Profile remembers the bytes written, under every
    name it knows the file by (a symbolic link inside the project and its target). Returns the
    rewrites not written, each with one line saying why (the others are written regardless)."""
    unwritten: list[tuple[FileRewrite, str]] = []
    names: dict[Path, list[str]] | None = None  # the project's files the Profile names, by real path
    with project_lock(root):
        clean_stale_temps({resolve(r.path, root).resolve().parent for r in rewrites})
        for file_rewrite in rewrites:
            if not file_rewrite.changed:
                continue
            why = _write_checked(resolve(file_rewrite.path, root), file_rewrite, root)
            if why is not None:
                unwritten.append((file_rewrite, f"{file_rewrite.path}: {why}"))
                continue
            if profile is not None:
                if names is None:
                    names = _names_by_file(profile.sources, root)
                written = sha256_bytes(file_rewrite.after.encode("utf-8"))
                for name in names.get(_real(file_rewrite.path, root), []):
                    profile.applied[name] = written
    return unwritten


def _real(path: str, root: Path) -> Path:
    """The file ``path`` names, links followed."""
    return resolve(path, root).resolve()


def _names_by_file(names: Iterable[str], root: Path) -> dict[Path, list[str]]:
    """The project's files among ``names``, by the file each names (links followed): a link
    inside the project and its target are one file with two names."""
    by_file: dict[Path, list[str]] = {}
    top = str(root.resolve())
    for name in names:
        if os.path.isabs(name) and not (name == top or name.startswith(top + os.sep)):
            continue  # a library's file: never written
        by_file.setdefault(_real(name, root), []).append(name)
    return by_file


# Called between writing the temp file and renaming it over the user's file (tests race it).
_before_rename: Callable[[Path], None] | None = None

_TEMP_TAG = "recompile-fix"
# Ours: .NAME.recompile-fix-PID-RANDOM.tmp (and .NAME.RANDOM.tmp, as releases before wrote them).
_OUR_TEMP = re.compile(r"^\.(?P<name>.+?)\.(?:" + _TEMP_TAG + r"-(?P<pid>\d+)-[a-z0-9_]+|[a-z0-9_]{8})\.tmp$")


def clean_stale_temps(directories: Iterable[Path]) -> None:
    """Remove the temp files a killed run left in ``directories``: only ours (their names say
    which file they were for, and which process wrote them), only where that file is there and
    the process that wrote them is gone."""
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = _OUR_TEMP.match(name)
            if match is None or not os.path.lexists(os.path.join(directory, match["name"])):
                continue
            if match["pid"] is not None and _alive(int(match["pid"])):
                continue  # a run writing now (in another project sharing the directory?)
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # ours, from an earlier write of this process that was cut short
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's
    return True


def _write_checked(path: Path, file_rewrite: FileRewrite, root: Path) -> str | None:
    """Write ``file_rewrite.after`` over ``path``; None, or why it was not written. A symbolic
    link is written through (its target replaced, the link kept) when the target is inside the
    project; a file with hard links is left alone (replacing it would split the links, writing
    it in place would change every linked copy and is not atomic), and so is a read-only file.

    The file is compared with the bytes the fix was computed from twice: before the new text is
    written to a temp file beside it, and again (bytes, inode, size, times) right before the temp
    file is renamed over it, so an editor's save while the temp file was written is never
    overwritten. An advisory lock on the file is held throughout: a program that takes one too
    is never raced at all."""
    if path.is_symlink():
        target = path.resolve()
        if not _inside(target, [root.resolve()]):
            return f"a symbolic link to {target}, outside the project; not changed"
        path = target
    before = file_rewrite.before.encode("utf-8")
    after = file_rewrite.after.encode("utf-8")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # never opened: a FIFO would block
            return "not a regular file; not changed"
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return "not a regular file; not changed"
            if st.st_nlink > 1:
                return (
                    f"has {st.st_nlink} hard links; not changed (edit the file one of them names, then profile again)"
                )
            if not st.st_mode & stat.S_IWUSR:
                return f"is read-only (mode {stat.S_IMODE(st.st_mode):04o}); not changed (make it writable to fix it)"
            if not _lock_file(fh.fileno()):
                return "locked by another program (an editor saving it?); not changed"
            raw = fh.read()
            if is_notebook(path):  # the text is of its code cells: the changed cells are written back
                try:
                    notebook = Notebook(path, raw)
                    if notebook.text.encode("utf-8") != before:
                        return _CHANGED_MEANWHILE
                    before, after = raw, notebook.rewritten(file_rewrite.after)
                except NotebookError as exc:
                    return str(exc).removeprefix(f"{path}: ")
            elif raw != before:
                return _CHANGED_MEANWHILE
            tmp = _write_temp(path, after, st.st_mode)
            try:
                if _before_rename is not None:
                    _before_rename(path)
                if not _unchanged(path, st, before):
                    return _CHANGED_MEANWHILE
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)  # the rename did not happen
    except OSError as exc:
        return f"cannot write: {exc.strerror or exc}; not changed"
    return None


def _lock_file(fd: int) -> bool:
    """An exclusive advisory lock on the open file (released when it is closed); False when
    another process holds one. True where there are no such locks."""
    if fcntl is None:  # pragma: no cover - Windows
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True  # a file system without locks: the comparisons still guard
    return True


def _unchanged(path: Path, st: os.stat_result, before: bytes) -> bool:
    """Is ``path`` still the file ``st`` described, with the bytes ``before``?"""
    try:
        now = os.stat(path, follow_symlinks=False)
        same = (now.st_ino, now.st_dev, now.st_size, now.st_mtime_ns, now.st_ctime_ns) == (
            st.st_ino,
            st.st_dev,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        )
        return same and path.read_bytes() == before
    except OSError:
        return False


def _write_temp(path: Path, data: bytes, mode: int) -> str:
    """A temp file beside ``path`` holding ``data``, with ``path``'s mode; its name."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_TEMP_TAG}-{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), stat.S_IMODE(mode))
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def diff_text(rewrites: list[FileRewrite]) -> str:
    """A unified diff of each rewrite; a notebook's one diff per changed cell (``a/nb.ipynb:cell 3``)."""
    return "".join(
        notebook_diff(r.path, r.before, r.after) if is_notebook(r.path) else unified_diff(r.path, r.before, r.after)
        for r in rewrites
    )


def notebook_diff(path: str, before: str, after: str) -> str:
    return "".join(unified_diff(f"{path}:cell {cell}", old, new) for cell, old, new in cell_diffs(before, after))
