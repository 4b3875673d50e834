"""`recompile-fix apply`: plan, rewrite and (unless asked for a diff) write, file by file.

Bad input is reported per file in one line and that file is left alone; every other file is
still processed. Writes are atomic and only touch files under the given paths whose bytes are
the ones the Profile recorded.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.config import Config
from recompile_fix.edits.edit import unified_diff
from recompile_fix.edits.rewrite import FileRewrite, rewrite
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.plan import plan
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.scan import StaticScan, discover
from recompile_fix.profile.model import Profile, resolve, same_as_profiled, sha256_bytes
from recompile_fix.suppression import is_suppressed


@dataclass
class ApplyResult:
    findings: list[Finding] = field(default_factory=list)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    already_applied: list[str] = field(default_factory=list)
    outside: list[Finding] = field(default_factory=list)
    files_parsed: int = 0  # files the static scan had to parse (cache misses)

    @property
    def pending(self) -> list[Finding]:
        return [f for r in self.rewrites for f in r.applied]


def _inside(path: Path, roots: list[Path]) -> bool:
    path = path.resolve()
    return any(path == root or root in path.parents for root in roots)


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
    """Plan (from the Profile, and from the source for the static rules), filter by
    configuration and suppression comments, rewrite, and write unless asked not to."""
    root_dir = Path(root or os.getcwd()).resolve()
    config = config or Config(root=root_dir)
    rules = tuple(r for r in rules if config.rule_enabled(r.id))
    roots = []
    for p in paths:
        resolved = Path(p).resolve()
        if not resolved.exists():
            raise SourceError(f"{p}: no such file or directory")
        if not _inside(resolved, [root_dir]):
            raise SourceError(f"{p}: outside the project ({root_dir}); run from the project root")
        roots.append(resolved)
    result = ApplyResult()
    planned: list[Finding] = []
    if profile is not None:
        planned = _plan_from_profile(profile, rules, root_dir, roots, paths, unsafe_fixes, result)
    scan = StaticScan(root_dir, rules, config.fingerprint(), jobs=jobs, use_cache=use_cache)
    static = scan.run(discover(paths, root_dir, config.excluded))
    result.errors.extend(scan.errors)
    result.files_parsed = scan.parsed
    seen = {(f.rule, f.file, f.location.line) for f in planned}
    planned.extend(f for f in static if (f.rule, f.file, f.location.line) not in seen)

    lines = _LineReader(root_dir)
    for finding in planned:
        if not config.rule_enabled(finding.rule, finding.file):
            continue
        if is_suppressed(lines.line(finding.file, finding.location.line), finding.rule):
            continue
        result.findings.append(finding)
    result.findings.sort(key=lambda f: (f.file, f.location.line, f.location.col or 0, f.rule))

    by_rule = {rule.id: rule for rule in rules}
    by_file: dict[str, list[Finding]] = {}
    for finding in result.findings:
        if finding.safety is Safety.SAFE or (finding.safety is Safety.UNSAFE and unsafe_fixes):
            by_file.setdefault(finding.file, []).append(finding)
    for path, file_findings in sorted(by_file.items()):
        file = resolve(path, root_dir)
        try:
            # Each fix parses what it needs (most need libcst, RF004's only the ast tree).
            source = SourceFile.read(Path(path), file.read_bytes(), parse=False)
            source.syntax  # noqa: B018 -- a file that does not parse fails here, before any fix
            file_rewrite = rewrite(path, source, file_findings, by_rule)
        except SourceError as exc:
            result.errors.append(str(exc))
            continue
        except OSError as exc:
            result.errors.append(f"{path}: cannot read: {exc.strerror}")
            continue
        except Exception as exc:  # a crash in one file never loses another file's work
            result.errors.append(f"{path}: internal error, not changed: {exc!r}")
            continue
        for finding, why in file_rewrite.skipped:
            result.errors.append(f"{path}:{finding.location.line}: {finding.rule} not applied: {why}")
        if not file_rewrite.changed:
            continue
        result.rewrites.append(file_rewrite)
        if write:
            _write_atomic(file, file_rewrite.after)
            if profile is not None and path in profile.sources:
                profile.applied[path] = sha256_bytes(file_rewrite.after.encode("utf-8"))
    return result


def _plan_from_profile(profile, rules, root_dir, roots, paths, unsafe_fixes, result) -> list[Finding]:
    """Findings from the Profile for files whose bytes are the ones it saw; errors for the rest."""
    project = Project(root_dir, expected_hashes=profile.sources)
    status: dict[str, str] = {}  # path -> ok / applied / stale / outside / unreadable

    def file_status(path: str) -> str:
        if path not in status:
            file = resolve(path, root_dir)
            try:
                data = file.read_bytes()
            except OSError:
                status[path] = "unreadable"
                return status[path]
            if profile.applied.get(path) == sha256_bytes(data):
                status[path] = "applied"
            elif not same_as_profiled(data, profile.sources.get(path)):
                status[path] = "stale"
            else:
                status[path] = "ok" if _inside(file, roots) else "outside"
        return status[path]

    def error_once(path: str, message: str) -> None:
        if not any(e.startswith(path + ":") for e in result.errors):
            result.errors.append(f"{path}: {message}")

    planned = []
    for finding in plan(profile, project, rules):
        state = file_status(finding.file)
        if state == "applied" or (state in ("outside", "unreadable") and finding.safety is Safety.NONE):
            continue  # nothing to say about a file we already fixed, or one we were not asked about
        if state == "stale":
            error_once(
                finding.file,
                "changed since it was profiled (stale Profile); run `recompile-fix profile` again; not changed",
            )
            continue
        if state == "outside":
            result.outside.append(finding)
            error_once(finding.file, f"outside the given paths ({', '.join(paths)}); not changed")
            continue
        planned.append(finding)
    for path, why in sorted(project.errors.items()):
        if _inside(resolve(path, root_dir), roots):
            if not any(e.startswith(path + ":") for e in result.errors):
                result.errors.append(why)
    result.already_applied = sorted(p for p, s in status.items() if s == "applied")
    return planned


class _LineReader:
    """One line of a file, for suppression comments; each file read once."""

    def __init__(self, root: Path):
        self.root = root
        self._lines: dict[str, list[str]] = {}

    def line(self, path: str, number: int) -> str:
        if path not in self._lines:
            try:
                self._lines[path] = resolve(path, self.root).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._lines[path] = []
        lines = self._lines[path]
        return lines[number - 1] if 0 < number <= len(lines) else ""


def _write_atomic(path: Path, text: str) -> None:
    mode = path.stat().st_mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def diff_text(result: ApplyResult) -> str:
    return "".join(unified_diff(r.path, r.before, r.after) for r in result.rewrites)
