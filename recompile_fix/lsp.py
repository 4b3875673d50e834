"""`recompile-fix lsp`: the Findings and fixes of `apply`, in any editor that speaks LSP (stdio).

* Diagnostics on open, on change (debounced) and on save: from the Profile for a file whose text
  (the editor's buffer, saved or not) hashes to what the Profile saw, and from the rules that
  need no Profile (``plan_static``). A file the Profile saw in other bytes gets one information
  diagnostic saying to profile again. Hover shows a Finding's notes and evidence.
* Code actions: a quick fix per Finding, whose edits are the ``rewrite()`` Edits that `apply`
  writes; "fix all safe fixes in this file" (``source.fixAll.recompile-fix``; unsafe fixes only
  ever as explicit quick fixes); "suppress", which adds ``# recompile-fix: ignore[ID]``.
* The server only reads: the Profile, ``pyproject.toml``, and source it parses with libcst. It
  never imports or runs the user's code, and a buffer that does not parse gives no actions.

Applying one quick fix changes the buffer, and a Profile matches by hash. So that the other
Findings stay usable, the server remembers each text it produced: a buffer that is the profiled
text with some of the server's own fixes applied (state ``S``), give or take suppression
comments, is still "the profiled file with S fixed". Quick fixes and fix-all in that state are
``rewrite(profiled text, S + more)`` minus ``rewrite(profiled text, S)``: the same Edits `apply`
would write for the whole set, so fixing one by one ends where `apply` ends.

The engine (``Engine``) knows nothing of LSP messages; ``build_server`` wires it to pygls,
which is imported only there (``pip install 'recompile-fix[lsp]'``).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import os
import queue
import re
import threading
import traceback
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.config import DEFAULT_PROFILE
from recompile_fix.edits.edit import Edit, apply_edits
from recompile_fix.edits.rewrite import FileRewrite, rewrite
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.plan import plan
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import Profile, relative_to_root, resolve, sha256_bytes
from recompile_fix.suppression import is_suppressed, strip_suppressions, with_suppression

log = logging.getLogger("recompile_fix.lsp")

DEFAULT_DEBOUNCE = 0.3  # seconds of quiet after a change before the file is analysed again
POLL_INTERVAL = 1.0  # seconds between checks that the Profile file is still the one read
STALE_MESSAGE = "Profile is stale for this file: run `recompile-fix profile` again"
FIX_ALL_KIND = "source.fixAll.recompile-fix"
QUICKFIX_KIND = "quickfix"
SOURCE = "recompile-fix"


def _sha(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


# -- positions ---------------------------------------------------------------------------------
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # LSP's line breaks (not str.splitlines's \x0c, \u2028, ...)


def code_units(text: str, encoding: str = "utf-16") -> int:
    """Length of ``text`` in the client's position encoding (LSP's default: UTF-16 code units)."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-32" or text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


class LineIndex:
    """Character offsets <-> LSP (line, character) positions for one text."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]

    def line_text(self, line: int) -> str:
        if not 0 <= line < len(self.starts):
            return ""
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[line] : end].rstrip("\r\n")

    def offset(self, line: int, column: int) -> int:
        """Offset of a (0-based line, character column) position, clamped to the line."""
        if line >= len(self.starts):
            return len(self.text)
        return self.starts[line] + min(max(column, 0), len(self.line_text(line)))

    def position(self, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
        offset = min(max(offset, 0), len(self.text))
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, code_units(self.text[self.starts[line] : offset], encoding)

    def offset_at(self, line: int, units: int, encoding: str = "utf-16") -> int:
        """Offset of an LSP position (``units`` in the client's encoding)."""
        if line >= len(self.starts):
            return len(self.text)
        text = self.line_text(line)
        count = 0
        for index, ch in enumerate(text):
            if count >= units:
                return self.starts[line] + index
            count += code_units(ch, encoding)
        return self.starts[line] + len(text)


def map_offset(edits: list[Edit], offset: int, *, after_insertions: bool) -> int:
    """Where ``offset`` of a text lies after ``edits``. An insertion at ``offset`` itself goes
    before it when ``after_insertions``; inside a replaced span, the span's start."""
    delta = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if edit.start == edit.end:
            if edit.start < offset or (edit.start == offset and after_insertions):
                delta += len(edit.new_text)
        elif edit.end <= offset:
            delta += len(edit.new_text) - (edit.end - edit.start)
        elif edit.start < offset:
            return edit.start + delta
    return offset + delta


def diff_edit(before: str, after: str) -> Edit:
    """One Edit turning ``before`` into ``after`` (common prefix and suffix kept)."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[len(before) - 1 - suffix] == after[len(after) - 1 - suffix]:
        suffix += 1
    return Edit("", prefix, len(before) - suffix, after[prefix : len(after) - suffix])


# -- the engine's data ------------------------------------------------------------------------
Range = tuple[tuple[int, int], tuple[int, int]]  # ((line, character), (line, character)), 0-based


@dataclass
class _Base:
    """A text the findings were planned on: the profiled text (``profiled``), or a buffer the
    Profile does not describe (static rules only)."""

    path: str
    text: str
    source: SourceFile | None  # None: does not parse
    findings: list[Finding]
    profiled: bool
    lines: LineIndex = field(init=False)
    rewrites: dict[frozenset, FileRewrite] = field(default_factory=dict)
    fixes: dict[tuple[int, str], Any] = field(default_factory=dict)  # (finding's index, torch name) -> Edits
    # sha256 of a text this server produced from ``text`` (suppression comments stripped) ->
    # the findings fixed in it
    states: dict[str, frozenset] = field(default_factory=dict)

    def __post_init__(self):
        self.lines = LineIndex(self.text)


@dataclass
class Item:
    """One diagnostic: a Finding (``index`` into its base's findings), or the stale-Profile note."""

    index: int | None
    finding: Finding | None
    range: Range
    message: str
    severity: str  # error / warning / information / hint
    data: dict[str, Any]

    @property
    def rule(self) -> str | None:
        return self.finding.rule if self.finding else None


@dataclass
class Analysis:
    path: str
    text: str
    sha: str
    base: _Base | None
    applied: frozenset  # findings of ``base`` already fixed in this text
    current: str  # the text the positions refer to: rewrite(base, applied), before suppressions
    items: list[Item]
    stale: bool = False
    parses: bool = True
    note: str | None = None  # why nothing is offered (the text does not parse)
    _lines: LineIndex | None = field(default=None, repr=False)
    _fix_all: list | None = field(default=None, repr=False)

    @property
    def lines(self) -> LineIndex:
        if self._lines is None:
            self._lines = LineIndex(self.text)
        return self._lines


@dataclass
class Action:
    title: str
    kind: str
    edits: list[tuple[Range, str]] | None  # None: computed on codeAction/resolve
    items: list[Item] = field(default_factory=list)
    preferred: bool = False
    data: dict[str, Any] | None = None


# -- the engine -------------------------------------------------------------------------------
class _BufferProject(Project):
    """A Project that reads the profiled text of an open file from the editor's buffer (which
    may be unsaved), and every other file from disk (hash-checked as usual)."""

    def __init__(self, root, expected_hashes):
        super().__init__(root, expected_hashes=expected_hashes)
        self.overlay: dict[str, str] = {}

    def add(self, path: str, text: str) -> bool:
        """Use ``text`` for ``path``; True when that changes what a rule would read."""
        if path in self.overlay:
            return False
        self.overlay[path] = text
        cached = self._cache.get(path)
        if cached is not None and not isinstance(cached, Exception):
            return False  # the disk held these very bytes: nothing changes
        self._cache.pop(path, None)
        self.stale.discard(path)
        self.errors.pop(path, None)
        return cached is not None

    def source(self, path: str) -> SourceFile | None:
        if path in self.overlay and path not in self._cache:
            try:
                self._cache[path] = SourceFile.parse(Path(path), self.overlay[path])
            except Exception as exc:  # noqa: BLE001 - a file that does not parse: no source
                self.errors[path] = str(exc)
                self._cache[path] = exc
        return super().source(path)


def _stamp(path: Path | None):
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class Engine:
    """Findings and fixes for the files of one project root. Not thread-safe: the server calls
    it from one worker thread."""

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        profile: str | None = None,
        encoding: str = "utf-16",
        logger: Callable[[str], None] | None = None,
    ):
        self.root = Path(root).resolve()
        self.explicit_profile = profile
        self.encoding = encoding
        self._log = logger or log.warning
        self.config = None
        self._config_stamp: Any = object()
        self.profile: Profile | None = None
        self.profile_path: Path | None = None
        self._profile_stamp: Any = object()
        self.rules: tuple[Rule, ...] = ()
        self._project: _BufferProject | None = None
        self._planned: list[Finding] | None = None
        self._bases: dict[str, _Base] = {}
        self._static_bases: OrderedDict[tuple[str, str], _Base] = OrderedDict()
        self._analyses: OrderedDict[tuple[str, str], Analysis] = OrderedDict()

    # -- configuration and Profile ----------------------------------------------------------
    def _load_config(self):
        try:
            from recompile_fix.config import Config, find_pyproject, load_config
        except ImportError:  # pragma: no cover - an older tree without configuration support
            return None, None
        pyproject = find_pyproject(self.root)
        stamp = (str(pyproject), _stamp(pyproject)) if pyproject else None
        if stamp == self._config_stamp:
            return self.config, stamp
        try:
            config = load_config(self.root)
        except UserError as exc:
            self._log(f"recompile-fix: {exc}; using the defaults")
            config = Config(root=self.root)
        return config, stamp

    def refresh(self) -> bool:
        """Reload the configuration and the Profile when their files changed; True if they did."""
        config, config_stamp = self._load_config()
        changed = config_stamp != self._config_stamp
        if changed:
            self.config, self._config_stamp = config, config_stamp
            from recompile_fix.rules import ALL_RULES

            self.rules = tuple(r for r in ALL_RULES if self.config is None or self.config.rule_enabled(r.id))
        # initializationOptions' "profile", else [tool.recompile-fix] profile (relative to its
        # pyproject.toml), else .recompile-fix/profile.json under the workspace root
        if self.explicit_profile:
            path = Path(self.explicit_profile)
            path = path if path.is_absolute() else self.root / path
        elif self.config is not None and getattr(self.config, "source", None) is not None:
            path = Path(self.config.profile)
            path = path if path.is_absolute() else Path(self.config.root) / path
        else:
            path = self.root / DEFAULT_PROFILE
        stamp = (str(path), _stamp(path))
        if changed or stamp != self._profile_stamp:
            self._profile_stamp, self.profile_path = stamp, path
            self.profile = None
            if stamp[1] is not None:
                try:
                    self.profile = Profile.load(path)
                except UserError as exc:
                    self._log(f"recompile-fix: {exc}; showing only the rules that need no Profile")
            changed = True
        if changed:
            self._project = _BufferProject(self.root, self.profile.sources) if self.profile else None
            self._planned = None
            self._bases.clear()
            self._static_bases.clear()
            self._analyses.clear()
        return changed

    def outdated(self) -> bool:
        """Has the Profile file changed since it was read (a new `recompile-fix profile` run)?
        Cheap: one stat. The server polls it, since not every editor reports file changes."""
        return (
            self.profile_path is not None and (str(self.profile_path), _stamp(self.profile_path)) != self._profile_stamp
        )

    def relative(self, file: str | os.PathLike) -> str:
        return relative_to_root(str(file), str(self.root))

    # -- planning -------------------------------------------------------------------------
    def _plan(self) -> list[Finding]:
        if self._planned is None:
            try:
                self._planned = plan(self.profile, self._project, self.rules)
            except Exception:  # noqa: BLE001 - a broken rule must not take the editor down
                self._log(f"recompile-fix: planning failed:\n{traceback.format_exc()}")
                self._planned = []
        return self._planned

    def _static_findings(self, source: SourceFile | None, path: str) -> list[Finding]:
        if source is None or (self.config is not None and self.config.excluded(path)):
            return []
        found: list[Finding] = []
        for rule in self._static_rules(source.text):
            try:
                found.extend(rule.plan_static(source, path))
            except Exception:  # noqa: BLE001
                self._log(f"recompile-fix: {rule.id} failed on {path}:\n{traceback.format_exc()}")
        return found

    def _static_rules(self, text: str) -> list[Rule]:
        data = text.encode("utf-8")
        return [r for r in self.rules if type(r).plan_static is not Rule.plan_static and r.may_fire(data)]

    def _merge(self, path: str, profiled: list[Finding], static: list[Finding]) -> list[Finding]:
        """As `apply` does: Profile findings, then static ones not on a line the Profile covers;
        configuration filters; sorted by position."""
        seen = {(f.rule, f.file, f.location.line) for f in profiled}
        merged = profiled + [f for f in static if (f.rule, f.file, f.location.line) not in seen]
        if self.config is not None:
            merged = [f for f in merged if self.config.rule_enabled(f.rule, f.file)]
        merged.sort(key=lambda f: (f.location.line, f.location.col or 0, f.rule))
        return merged

    def _profiled_base(self, path: str, text: str) -> _Base:
        replan = self._project.add(path, text)
        if replan:
            self._planned = None  # a rule may now read a file it could not before
        source = self._project.source(path)
        findings = self._merge(path, [f for f in self._plan() if f.file == path], self._static_findings(source, path))
        base = _Base(path, text, source, findings, profiled=True)
        base.states[_sha(strip_suppressions(text))] = frozenset()
        self._bases[path] = base
        if replan:
            self._replan_others(path)
        return base

    def _replan_others(self, path: str) -> None:
        for other, base in list(self._bases.items()):
            if other == path:
                continue
            findings = self._merge(
                other, [f for f in self._plan() if f.file == other], self._static_findings(base.source, other)
            )
            if [f.to_json() for f in findings] != [f.to_json() for f in base.findings]:
                self._bases[other] = fresh = _Base(other, base.text, base.source, findings, profiled=True)
                fresh.states[_sha(strip_suppressions(base.text))] = frozenset()
                self._analyses.clear()

    def _static_base(self, path: str, text: str, sha: str) -> _Base:
        key = (path, sha)
        if key in self._static_bases:
            self._static_bases.move_to_end(key)
            return self._static_bases[key]
        source = None
        if self._static_rules(text):
            try:
                source = SourceFile.parse(Path(path), text)
            except Exception:  # noqa: BLE001 - does not parse: nothing to say, nothing to fix
                source = None
        base = _Base(path, text, source, self._merge(path, [], self._static_findings(source, path)), profiled=False)
        self._static_bases[key] = base
        while len(self._static_bases) > 16:
            self._static_bases.popitem(last=False)
        return base

    def _locate(self, path: str, text: str, sha: str) -> tuple[_Base | None, frozenset, bool]:
        """(profiled base, findings already fixed in ``text``, stale?)."""
        profile = self.profile
        if profile is None or path not in profile.sources:
            return None, frozenset(), False
        expected = profile.sources[path]
        stripped_sha = _sha(strip_suppressions(text))
        if profile.applied.get(path) in (sha, stripped_sha):
            return None, frozenset(), False  # `apply` already fixed this file
        base = self._bases.get(path)
        if base is None:
            if sha == expected:
                base = self._profiled_base(path, text)
            elif stripped_sha == expected:
                base = self._profiled_base(path, strip_suppressions(text))
            else:
                try:
                    disk = resolve(path, self.root).read_bytes()
                    if sha256_bytes(disk) == expected:
                        base = self._profiled_base(path, disk.decode("utf-8"))
                except (OSError, UnicodeDecodeError):
                    pass
        if base is not None:
            if sha == expected:
                return base, frozenset(), False
            state = base.states.get(stripped_sha)
            if state is not None:
                return base, state, False
        return None, frozenset(), True

    # -- analysis -------------------------------------------------------------------------
    def analyze(self, path: str, text: str) -> Analysis:
        self.refresh()
        sha = _sha(text)
        key = (path, sha)
        cached = self._analyses.get(key)
        if cached is not None:
            self._analyses.move_to_end(key)
            return cached
        base, applied, stale = self._locate(path, text, sha)
        if base is None:
            base = self._static_base(path, text, sha)
        current = self._rewrite(base, applied).after if applied else base.text
        analysis = Analysis(
            path=path, text=text, sha=sha, base=base, applied=applied, current=current, items=[], stale=stale
        )
        if base.source is None and (base.profiled or self._static_rules(text)):
            analysis.parses = False
            analysis.note = f"{path}: does not parse; no fixes offered"
        analysis.items = self._items(analysis)
        self._analyses[key] = analysis
        while len(self._analyses) > 32:
            self._analyses.popitem(last=False)
        return analysis

    def _items(self, analysis: Analysis) -> list[Item]:
        items: list[Item] = []
        if analysis.stale:
            first = analysis.lines.line_text(0)
            items.append(
                Item(
                    None,
                    None,
                    ((0, 0), (0, code_units(first, self.encoding))),
                    STALE_MESSAGE,
                    "information",
                    {"kind": "stale"},
                )
            )
        base = analysis.base
        shift = self._rewrite(base, analysis.applied).edits if analysis.applied else []
        current = LineIndex(analysis.current) if analysis.applied else base.lines
        for index, finding in enumerate(base.findings):
            if index in analysis.applied:
                continue
            start, end = self._span(base, finding)
            if shift:
                start = map_offset(shift, start, after_insertions=True)
                end = max(start, map_offset(shift, end, after_insertions=False))
            rng = (current.position(start, self.encoding), current.position(end, self.encoding))
            if is_suppressed(analysis.lines.line_text(rng[0][0]), finding.rule):
                continue
            items.append(
                Item(
                    index,
                    finding,
                    rng,
                    _message(finding),
                    _severity(finding),
                    {
                        "rule": finding.rule,
                        "safety": finding.safety.value,
                        "confidence": finding.confidence,
                        "index": index,
                        "sha": analysis.sha,
                    },
                )
            )
        return items

    @staticmethod
    def _span(base: _Base, finding: Finding) -> tuple[int, int]:
        """Offsets in the base text of a Finding's location. A rule that placed its fix gives
        libcst's character columns; a location left as the Profile recorded it (a Finding with
        no fix) has CPython's UTF-8 byte columns."""
        loc = finding.location
        lines = base.lines
        line = max(loc.line - 1, 0)
        end_line = max((loc.end_line or loc.line) - 1, line)
        bytes_ = finding.safety is Safety.NONE and finding.confidence == "profile"

        def column(line_no: int, col: int | None, default: int) -> int:
            if col is None:
                return default
            if bytes_:
                text = lines.line_text(line_no)
                return len(text.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
            return col

        text = lines.line_text(line)
        indent = len(text) - len(text.lstrip())
        start = lines.offset(line, column(line, loc.col, indent))
        end_text = lines.line_text(end_line)
        end = lines.offset(end_line, column(end_line, loc.end_col, len(end_text)))
        return start, max(start, end)

    # -- fixes ----------------------------------------------------------------------------
    def _rewrite(self, base: _Base, indices: frozenset) -> FileRewrite:
        """``rewrite()`` of these findings, exactly as `apply` calls it; each Finding's own
        Edits are computed once per base (a rule's ``fix`` depends on the Finding and the
        source alone), so growing sets of fixes cost one ``fix`` each."""
        cached = base.rewrites.get(indices)
        if cached is None:
            by_rule = {r.id: _OnceFix(r, base) for r in self.rules}
            findings = [base.findings[i] for i in sorted(indices)]
            cached = rewrite(base.path, base.source, findings, by_rule)
            base.rewrites[indices] = cached
            done = {id(f) for f in cached.applied}
            fixed = frozenset(i for i in indices if id(base.findings[i]) in done)
            base.states.setdefault(_sha(strip_suppressions(cached.after)), fixed)
        return cached

    def _edits_to(self, analysis: Analysis, target: frozenset, require: int | None = None):
        """LSP edits turning this text into ``rewrite(base, target)``, or None when they would
        change nothing (or leave out the one Finding required)."""
        base = analysis.base
        if base.source is None:
            return None
        result = self._rewrite(base, target)
        if require is not None and all(f is not base.findings[require] for f in result.applied):
            return None
        if result.after == analysis.current:
            return None
        before = self._rewrite(base, analysis.applied).edits if analysis.applied else []
        remaining = Counter(before)
        delta = []
        for edit in result.edits:
            if remaining[edit]:
                remaining[edit] -= 1
            else:
                delta.append(edit)
        mapped = None
        for after_insertions in (True, False):
            candidate = [
                Edit(
                    e.file,
                    map_offset(before, e.start, after_insertions=after_insertions),
                    map_offset(before, e.end, after_insertions=after_insertions),
                    e.new_text,
                    e.rule,
                )
                for e in delta
            ]
            try:
                if apply_edits(analysis.current, candidate) == result.after:
                    mapped = candidate
                    break
            except ValueError:
                continue
        if mapped is None:  # never expected: one edit from the texts themselves is always right
            mapped = [diff_edit(analysis.current, result.after)]
        lines = LineIndex(analysis.current)
        ordered = sorted(enumerate(mapped), key=lambda item: (item[1].start, item[1].end, item[0]))
        return [
            ((lines.position(e.start, self.encoding), lines.position(e.end, self.encoding)), e.new_text)
            for _, e in ordered
        ]

    def fix_all_target(self, analysis: Analysis) -> frozenset:
        safe = {
            item.index for item in analysis.items if item.finding is not None and item.finding.safety is Safety.SAFE
        }
        return analysis.applied | frozenset(safe)

    def fix_all(self, analysis: Analysis):
        """The edits of "fix all safe fixes in this file" (cached per text), or None."""
        if analysis._fix_all is None:
            target = self.fix_all_target(analysis)
            edits = self._edits_to(analysis, target) if target != analysis.applied else None
            analysis._fix_all = [edits]
        return analysis._fix_all[0]

    def suppress_edit(self, analysis: Analysis, item: Item):
        line = item.range[0][0]
        old = analysis.lines.line_text(line)
        new = with_suppression(old, item.rule)
        if new == old:
            return None
        prefix = 0
        while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
            prefix += 1
        return [
            (((line, code_units(old[:prefix], self.encoding)), (line, code_units(old, self.encoding))), new[prefix:])
        ]

    def actions(
        self, analysis: Analysis, rng: Range, only: list[str] | None = None, *, lazy_fix_all: bool = False
    ) -> list[Action]:
        if not analysis.parses or analysis.base is None or analysis.base.source is None:
            return []
        actions: list[Action] = []
        rules = {r.id: r for r in self.rules}
        if _kind_wanted(QUICKFIX_KIND, only):
            for item in analysis.items:
                if item.finding is None or not _overlaps(item.range, rng):
                    continue
                finding = item.finding
                name = rules[finding.rule].name if finding.rule in rules else ""
                label = f"{finding.rule} ({name})" if name else finding.rule
                if finding.fixable and finding.rule in rules:
                    edits = self._edits_to(analysis, analysis.applied | {item.index}, require=item.index)
                    if edits:
                        unsafe = finding.safety is Safety.UNSAFE
                        actions.append(
                            Action(
                                f"Fix {label}" + (" (unsafe fix: review it)" if unsafe else ""),
                                QUICKFIX_KIND,
                                edits,
                                [item],
                                preferred=not unsafe,
                            )
                        )
                edits = self.suppress_edit(analysis, item)
                if edits:
                    actions.append(
                        Action(
                            f"Suppress {finding.rule} on this line (# recompile-fix: ignore[{finding.rule}])",
                            QUICKFIX_KIND,
                            edits,
                            [item],
                        )
                    )
        if _kind_wanted(FIX_ALL_KIND, only) and self.fix_all_target(analysis) != analysis.applied:
            title = "recompile-fix: fix all safe fixes in this file"
            if lazy_fix_all:  # the client resolves the edit when it is chosen (unless it is ready)
                ready = analysis._fix_all[0] if analysis._fix_all is not None else None
                actions.append(
                    Action(
                        title, FIX_ALL_KIND, ready, data={"fix_all": True, "path": analysis.path, "sha": analysis.sha}
                    )
                )
            else:
                edits = self.fix_all(analysis)
                if edits:
                    actions.append(Action(title, FIX_ALL_KIND, edits))
        return actions

    def hover(self, analysis: Analysis, position: tuple[int, int]) -> tuple[str, Range] | None:
        hits = [item for item in analysis.items if _contains(item.range, position)]
        if not hits:
            return None
        parts = [_hover_markdown(item, {r.id: r for r in self.rules}) for item in hits]
        start = min(item.range[0] for item in hits)
        end = max(item.range[1] for item in hits)
        return "\n\n---\n\n".join(parts), (start, end)


class _OnceFix:
    """A rule whose ``fix`` remembers its Edits per Finding of one base."""

    def __init__(self, rule: Rule, base: _Base):
        self._rule, self._base = rule, base
        self._index = {id(f): i for i, f in enumerate(base.findings)}

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        key = (self._index.get(id(finding), -1 - id(finding)), torch_name)
        memo = self._base.fixes
        if key not in memo:
            try:
                memo[key] = list(self._rule.fix(finding, source, torch_name))
            except Exception as exc:  # noqa: BLE001 - rewrite() reports it, every time
                memo[key] = exc
        if isinstance(memo[key], Exception):
            raise memo[key]
        return list(memo[key])

    def __getattr__(self, name):
        return getattr(self._rule, name)


def _message(finding: Finding) -> str:
    message = finding.message
    if finding.safety is Safety.NONE and finding.notes:
        message += f"\nNo automatic fix: {finding.notes[0]}"
    elif finding.safety is Safety.UNSAFE:
        message += "\nThe fix is unsafe: offered as a quick fix only, never in fix-all."
    return message


def _severity(finding: Finding) -> str:
    if finding.confidence != "profile":
        return "information"  # seen in the source alone: lower confidence
    return "warning" if finding.fixable else "information"


def _kind_wanted(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def _overlaps(a: Range, b: Range) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _contains(rng: Range, position: tuple[int, int]) -> bool:
    return rng[0] <= position <= rng[1]


def _hover_markdown(item: Item, rules: dict[str, Rule]) -> str:
    if item.finding is None:
        return f"**recompile-fix**: {item.message}"
    finding = item.finding
    rule = rules.get(finding.rule)
    fix = {Safety.SAFE: "safe fix", Safety.UNSAFE: "unsafe fix (quick fix only)", Safety.NONE: "no fix"}
    head = f"**{finding.rule}**" + (f" {rule.name}" if rule else "") + f" · {fix[finding.safety]}"
    if finding.confidence != "profile":
        head += " · seen in the source alone"
    lines = [head, "", finding.message]
    if finding.notes:
        lines.append("")
        lines.extend(f"- {note}" for note in finding.notes)
    if finding.evidence:
        lines += ["", "**Evidence** (from the Profile)" if finding.confidence == "profile" else "**Evidence**"]
        for key, value in finding.evidence.items():
            label = key.replace("_", " ")
            if isinstance(value, (list, tuple)):
                if not value:
                    continue
                lines.append(f"- {label}:")
                lines.append("  ```")
                lines.extend(f"  {v}" for v in value)
                lines.append("  ```")
            else:
                lines.append(f"- {label}: `{value}`")
    return "\n".join(lines)


# -- one worker thread: parsing and rewriting never block the event loop ----------------------
class _Worker:
    """Runs the engine's work in one thread, requests before background warm-up."""

    URGENT, BACKGROUND = 0, 1

    def __init__(self):
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._seq = itertools.count()
        self._thread = threading.Thread(target=self._run, name="recompile-fix-lsp", daemon=True)
        self._thread.start()

    def submit(self, fn, *args, priority: int = URGENT) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((priority, next(self._seq), fn, args, loop, future))
        return future

    def stop(self) -> None:
        self._queue.put((-1, -1, None, (), None, None))

    def _run(self) -> None:
        while True:
            _, _, fn, args, loop, future = self._queue.get()
            if fn is None:
                return
            if future.cancelled():
                continue
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop is closed: the server is exiting
                return


def _settle(future: asyncio.Future, result, error) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


# -- the pygls server -------------------------------------------------------------------------
def build_server(debounce: float = DEFAULT_DEBOUNCE):
    """The language server (pygls). Imported here so the rest of the tool does not need pygls."""
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer
    from pygls.uris import to_fs_path

    import recompile_fix

    server = LanguageServer(
        "recompile-fix", recompile_fix.__version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental
    )
    worker = _Worker()
    severities = {
        "error": lsp.DiagnosticSeverity.Error,
        "warning": lsp.DiagnosticSeverity.Warning,
        "information": lsp.DiagnosticSeverity.Information,
        "hint": lsp.DiagnosticSeverity.Hint,
    }

    class State:
        def __init__(self):
            self.roots: list[Path] = []
            self.options: dict = {}
            self.engines: dict[Path, Engine] = {}
            self.pending: dict[str, asyncio.Task] = {}
            self.open: set[str] = set()
            self.latest: dict[str, Analysis] = {}
            self.encoding = "utf-16"
            self.resolve_edits = False
            self.debounce_s = debounce

    state = State()

    def report(message: str, kind=lsp.MessageType.Warning) -> None:
        try:
            server.window_log_message(lsp.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001 - not connected yet, or already gone
            log.warning("%s", message)

    def engine_for(file: Path) -> Engine:
        file = file.resolve()
        inside = [r for r in state.roots if r == file or r in file.parents]
        if inside:
            root = max(inside, key=lambda r: len(r.parts))
        else:  # no workspace folder: the nearest directory with a Profile or a pyproject.toml
            root = next(
                (d for d in file.parents if (d / ".recompile-fix").is_dir() or (d / "pyproject.toml").is_file()),
                file.parent,
            )
        engine = state.engines.get(root)
        if engine is None:
            profile = state.options.get("profile")
            engine = state.engines[root] = Engine(
                root, profile=profile, encoding=state.encoding, logger=lambda m: server_log(m)
            )
        return engine

    loop_holder: dict[str, asyncio.AbstractEventLoop] = {}

    def server_log(message: str) -> None:  # called from the worker thread
        loop = loop_holder.get("loop")
        if loop is not None:
            loop.call_soon_threadsafe(report, message)
        else:
            log.warning("%s", message)

    def document(uri: str):
        if uri not in state.open:
            return None
        doc = server.workspace.get_text_document(uri)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            return None
        return doc, Path(path)

    def analyze_now(engine: Engine, path: Path, text: str) -> Analysis:
        return engine.analyze(engine.relative(path), text)

    async def analysis_for(uri: str) -> tuple[Engine, Analysis, int | None] | None:
        found = document(uri)
        if found is None:
            return None
        doc, path = found
        engine = engine_for(path)
        text, version = doc.source, doc.version
        latest = state.latest.get(uri)
        if latest is not None and latest.text == text:
            return engine, latest, version
        analysis = await worker.submit(analyze_now, engine, path, text)
        return engine, analysis, version

    def to_range(rng: Range) -> lsp.Range:
        (l1, c1), (l2, c2) = rng
        return lsp.Range(start=lsp.Position(line=l1, character=c1), end=lsp.Position(line=l2, character=c2))

    def to_diagnostic(item: Item) -> lsp.Diagnostic:
        return lsp.Diagnostic(
            range=to_range(item.range),
            message=item.message,
            severity=severities[item.severity],
            code=item.rule,
            source=SOURCE,
            data=item.data,
        )

    def warm(engine: Engine, analysis: Analysis) -> None:
        """Background: the fix-all edits, so that the first code action finds them ready."""
        try:
            if analysis.parses and analysis.base is not None and analysis.base.source is not None:
                engine.fix_all(analysis)
        except Exception:  # noqa: BLE001 - the request that needs it will report it
            pass

    async def run_analysis(uri: str, delay: float) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            found = document(uri)
            if found is None:
                return
            doc, path = found
            engine = engine_for(path)
            text, version = doc.source, doc.version
            analysis = await worker.submit(analyze_now, engine, path, text)
            if uri not in state.open or server.workspace.get_text_document(uri).version != version:
                return  # a newer change is on its way
            state.latest[uri] = analysis
            server.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=uri, version=version, diagnostics=[to_diagnostic(i) for i in analysis.items]
                )
            )
            worker.submit(warm, engine, analysis, priority=_Worker.BACKGROUND)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - never take the editor's session down
            report(f"recompile-fix: analysis of {uri} failed:\n{traceback.format_exc()}", lsp.MessageType.Error)

    def schedule(uri: str, delay: float) -> None:
        previous = state.pending.pop(uri, None)
        if previous is not None and not previous.done():
            previous.cancel()
        state.pending[uri] = asyncio.ensure_future(run_analysis(uri, delay))

    @server.feature(lsp.INITIALIZE)
    def initialize(ls, params: lsp.InitializeParams):
        state.options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        if "debounce" in state.options:
            try:
                state.debounce_s = float(state.options["debounce"])
            except (TypeError, ValueError):
                pass
        roots = [to_fs_path(f.uri) for f in (params.workspace_folders or [])]
        if params.root_uri:
            roots.append(to_fs_path(params.root_uri))
        elif params.root_path:
            roots.append(params.root_path)
        state.roots = [Path(r).resolve() for r in roots if r]
        encoding = ls.workspace.position_encoding
        state.encoding = str(getattr(encoding, "value", encoding) or "utf-16")
        resolve_support = _get(params.capabilities, "text_document", "code_action", "resolve_support")
        state.resolve_edits = bool(resolve_support and "edit" in (resolve_support.properties or []))

    async def poll_profiles() -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            try:
                if any(engine.outdated() for engine in list(state.engines.values())):
                    refresh_all()
            except Exception:  # noqa: BLE001
                report(f"recompile-fix: {traceback.format_exc()}")

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls, params):
        loop_holder["loop"] = asyncio.get_running_loop()
        loop_holder["poll"] = asyncio.ensure_future(poll_profiles())
        worker.submit(_warm_black, priority=_Worker.BACKGROUND)
        if _get(ls.client_capabilities, "workspace", "did_change_watched_files", "dynamic_registration"):
            try:
                await ls.client_register_capability_async(
                    lsp.RegistrationParams(
                        registrations=[
                            lsp.Registration(
                                id="recompile-fix-watch",
                                method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                                    watchers=[
                                        lsp.FileSystemWatcher(glob_pattern="**/.recompile-fix/*.json"),
                                        lsp.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                                    ]
                                ),
                            )
                        ]
                    )
                )
            except Exception:  # noqa: BLE001 - watching is a convenience
                pass

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: lsp.DidOpenTextDocumentParams):
        state.open.add(params.text_document.uri)
        schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: lsp.DidChangeTextDocumentParams):
        schedule(params.text_document.uri, state.debounce_s)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params: lsp.DidSaveTextDocumentParams):
        refresh_all()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: lsp.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        state.open.discard(uri)
        state.latest.pop(uri, None)
        task = state.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls, params: lsp.DidChangeWorkspaceFoldersParams):
        removed = {Path(to_fs_path(f.uri)).resolve() for f in params.event.removed or []}
        added = [Path(to_fs_path(f.uri)).resolve() for f in params.event.added or []]
        state.roots = [r for r in state.roots if r not in removed] + added
        for root in removed:
            state.engines.pop(root, None)
        refresh_all()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls, params):
        refresh_all()

    def refresh_all() -> None:
        """A save may be a new Profile or configuration: analyse every open file again (the
        engine reloads what changed; unchanged files come back from its cache)."""
        for uri in list(state.open):
            schedule(uri, 0)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True),
    )
    async def code_action(ls, params: lsp.CodeActionParams):
        try:
            found = await analysis_for(params.text_document.uri)
            if found is None:
                return None
            engine, analysis, version = found
            rng = (
                (params.range.start.line, params.range.start.character),
                (params.range.end.line, params.range.end.character),
            )
            only = [str(k.value if hasattr(k, "value") else k) for k in (params.context.only or [])] or None
            actions = await worker.submit(lambda: engine.actions(analysis, rng, only, lazy_fix_all=state.resolve_edits))
            uri = params.text_document.uri
            return [to_code_action(uri, version, a) for a in actions] or None
        except Exception:  # noqa: BLE001
            report(f"recompile-fix: code actions failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return None

    def to_code_action(uri: str, version: int | None, action: Action) -> lsp.CodeAction:
        edit = None
        if action.edits is not None:
            edit = workspace_edit(uri, version, action.edits)
        return lsp.CodeAction(
            title=action.title,
            kind=action.kind,
            edit=edit,
            diagnostics=[to_diagnostic(i) for i in action.items] or None,
            is_preferred=action.preferred or None,
            data=dict(action.data, uri=uri) if action.data else None,
        )

    def workspace_edit(uri: str, version: int | None, edits) -> lsp.WorkspaceEdit:
        text_edits = [lsp.TextEdit(range=to_range(rng), new_text=text) for rng, text in edits]
        if _get(server.client_capabilities, "workspace", "workspace_edit", "document_changes"):
            return lsp.WorkspaceEdit(
                document_changes=[
                    lsp.TextDocumentEdit(
                        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                        edits=text_edits,
                    )
                ]
            )
        return lsp.WorkspaceEdit(changes={uri: text_edits})

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls, action: lsp.CodeAction):
        try:
            data = action.data or {}
            if not data.get("fix_all") or action.edit is not None:
                return action
            uri = data.get("uri")
            found = await analysis_for(uri)
            if found is None:
                return action
            engine, analysis, version = found
            if analysis.sha != data.get("sha"):
                return action  # the buffer changed since: nothing to apply
            edits = await worker.submit(engine.fix_all, analysis)
            if edits:
                action.edit = workspace_edit(uri, version, edits)
            return action
        except Exception:  # noqa: BLE001
            report(f"recompile-fix: resolving a code action failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return action

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls, params: lsp.HoverParams):
        try:
            found = await analysis_for(params.text_document.uri)
            if found is None:
                return None
            engine, analysis, _ = found
            result = engine.hover(analysis, (params.position.line, params.position.character))
            if result is None:
                return None
            text, rng = result
            return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text), range=to_range(rng))
        except Exception:  # noqa: BLE001
            report(f"recompile-fix: hover failed:\n{traceback.format_exc()}", lsp.MessageType.Error)
            return None

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls, params):
        worker.stop()

    return server


def _warm_black() -> None:
    from recompile_fix.edits.format import format_statement

    format_statement("x = 1")


def _get(obj, *names):
    for name in names:
        if obj is None:
            return None
        obj = getattr(obj, name, None)
    return obj


def serve(debounce: float = DEFAULT_DEBOUNCE) -> None:
    """Run the language server on stdin/stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="recompile-fix lsp: %(message)s")
    build_server(debounce).start_io()
