"""The language server's engine: for the files of one project root, the Findings of a buffer
(saved or not) and the Edits of its fixes, exactly as `apply` finds and makes them: the fix
pipeline's ``find`` (configuration, suppression comments, staleness, the Profile's evidence
mapped onto an edited text, arbitration) with the editor's buffers as its texts, its selection,
the same ``rewrite``. It knows nothing of LSP messages."""

from __future__ import annotations

import logging
import os
import traceback
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

from recompile_fix.analysis.source import SourceFile
from recompile_fix.config import DEFAULT_PROFILE, Config, find_pyproject, load_config
from recompile_fix.edits.edit import Edit, apply_edits
from recompile_fix.edits.rewrite import FileRewrite, rewrite
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Finding, Safety, stands_in_for
from recompile_fix.findings.rule import Rule
from recompile_fix.lsp.items import (
    FIX_ALL_KIND,
    QUICKFIX_KIND,
    STALE_MESSAGE,
    Action,
    Analysis,
    Base,
    Item,
    contains,
    diagnostic_message,
    hover_markdown,
    kind_wanted,
    overlaps,
    severity_of,
    text_sha,
)
from recompile_fix.lsp.positions import LineIndex, Range, code_units, diff_edit, map_offset
from recompile_fix.pipeline.fix import ApplyResult, find, is_selected
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.model import Profile, relative_to_root, sha256_bytes
from recompile_fix.profile.validate import check_against_sources
from recompile_fix.suppression import is_suppressed, strip_suppressions, with_suppression

__all__ = ["Engine"]

log = logging.getLogger("recompile_fix.lsp")


@dataclass
class _AnchoredBase(Base):
    """A buffer edited since profiling whose Findings were planned from the Profile's evidence
    mapped onto it (analysis.relocate, as `apply` maps it), with a line for each frame of the
    file whose own code changed (stale, not fixed)."""

    notes: list[str] = field(default_factory=list)


def _read_or_none(path: str, root: Path, profile: Profile | None) -> bytes | None:
    try:
        return read_named_file(path, root, profile.interpreter if profile else None)
    except OSError:
        return None


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
        self.config = Config(root=self.root)
        self._config_stamp: Any = object()
        self.profile: Profile | None = None
        self.profile_path: Path | None = None
        self._profile_stamp: Any = object()
        self.rules: tuple[Rule, ...] = ()
        self._bases: dict[str, Base] = {}
        self._static_bases: OrderedDict[tuple[str, str], Base] = OrderedDict()
        self._anchored: OrderedDict[tuple[str, str], _AnchoredBase | None] = OrderedDict()
        self._analyses: OrderedDict[tuple[str, str], Analysis] = OrderedDict()

    # -- configuration and Profile ----------------------------------------------------------
    def _load_config(self) -> tuple[Config, Any]:
        """The configuration (the defaults, said in one line, where it is wrong) and its stamp."""
        pyproject = find_pyproject(self.root)
        stamp = (str(pyproject), _stamp(pyproject)) if pyproject else None
        if stamp == self._config_stamp:
            return self.config, stamp
        try:
            from recompile_fix.rules import ALL_RULES

            config = load_config(self.root)
            config.check_selectors(r.id for r in ALL_RULES)
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

            self.rules = tuple(r for r in ALL_RULES if self.config.rule_enabled(r.id))
        # initializationOptions' "profile", else [tool.recompile-fix] profile (relative to its
        # pyproject.toml), else .recompile-fix/profile.json under the workspace root
        if self.explicit_profile:
            path = Path(self.explicit_profile)
            path = path if path.is_absolute() else self.root / path
        elif self.config.source is not None:
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
                    check_against_sources(self.profile, lambda p: _read_or_none(p, self.root, self.profile), self.root)
                except Exception as exc:  # noqa: BLE001 - whatever is wrong with it, one line
                    self.profile = None  # never keep fixes from a Profile that no longer reads
                    why = str(exc) if isinstance(exc, UserError) else f"{path}: cannot read the Profile: {exc!r}"
                    self._log(f"recompile-fix: {why}; showing only the rules that need no Profile")
            changed = True
        if changed:
            self._bases.clear()
            self._static_bases.clear()
            self._anchored.clear()
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

    # -- finding: the fix pipeline's find, the editor's buffers as its texts ----------------
    def _find(self, path: str, text: str) -> tuple[list[Finding], ApplyResult | None]:
        """``pipeline.find`` for ``path`` as `apply` finds it (configuration, suppression comments,
        staleness, the Profile's evidence mapped onto an edited text, arbitration), its text
        ``text`` and every other profiled file open in the editor read from its buffer. What it
        found anew is kept in the derived cache where every buffer is its saved file. ([], None)
        when it fails: a broken rule never takes the editor down."""
        if self.config.excluded(path):
            return [], None  # the configuration's exclude: `apply .` never reads it either
        texts = {other: base.text for other, base in self._bases.items()}
        texts[path] = text
        try:
            result = find(
                [str(self.root / path)],
                self.profile,
                self.rules,
                root=self.root,
                config=self.config,
                jobs=1,
                use_cache=False,
                texts=texts,
                profile_path=self.profile_path,
                read_derived=True,  # what `report`, `apply` or `profile` found over these bytes
            )
        except Exception:  # noqa: BLE001
            self._log(f"recompile-fix: finding in {path} failed:\n{traceback.format_exc()}")
            return [], None
        memo = result.memo
        if (
            memo is not None
            and memo.changed
            and all(
                _read_or_none(other, self.root, self.profile) == buffer.encode("utf-8")
                for other, buffer in texts.items()
            )
        ):
            # Found over the saved files: kept as `apply` keeps it, so the next session (a clone
            # whose Profile was committed plans it once) reads it. Never over an unsaved buffer.
            memo.save()
        return [f for f in result.findings if f.file == path], result

    def _source(self, path: str, text: str, result: ApplyResult | None) -> SourceFile | None:
        """``text`` as find parsed it, where it did; else checked with ``ast`` only, its libcst
        tree left to the first fix (a diagnostic needs none: a file opened with nothing to fix,
        or whose Findings the derived cache had, is diagnosed without loading libcst). None when
        it does not parse."""
        known = result.parsed.get(path) if result is not None else None
        if known is not None and known.text == text:
            return known
        try:
            source = SourceFile.parse(Path(path), text, parse=False)
            source.syntax  # noqa: B018 - a syntax error is raised here
            return source
        except Exception:  # noqa: BLE001 - does not parse: nothing to say, nothing to fix
            return None

    def _static_rules(self, text: str) -> list[Rule]:
        data = text.encode("utf-8")
        return [r for r in self.rules if type(r).plan_static is not Rule.plan_static and r.may_fire(data)]

    def _profiled_base(self, path: str, text: str) -> Base:
        """The profiled text of ``path``; a buffer that gives a rule bytes the disk did not (an
        unsaved profiled text) may change what the other open files' rules read: found again."""
        findings, result = self._find(path, text)
        base = Base(path, text, self._source(path, text, result), findings, profiled=True)
        base.states[text_sha(strip_suppressions(text))] = frozenset()
        self._bases[path] = base
        if _read_or_none(path, self.root, self.profile) != text.encode("utf-8"):
            self._find_others_again(path)
        return base

    def _find_others_again(self, path: str) -> None:
        for other, base in list(self._bases.items()):
            if other == path:
                continue
            findings, result = self._find(other, base.text)
            if [f.to_json() for f in findings] != [f.to_json() for f in base.findings]:
                self._bases[other] = fresh = Base(other, base.text, base.source, findings, profiled=True)
                fresh.states[text_sha(strip_suppressions(base.text))] = frozenset()
                self._analyses.clear()

    def _static_base(self, path: str, text: str, sha: str) -> Base:
        """A text the Profile does not describe (none loaded, a file it did not see, one `apply`
        fixed, or one edited past mapping): the rules that need no Profile (``find`` arbitrates
        them with the Profile's facts); none can fire where no rule's pattern occurs."""
        key = (path, sha)
        if key in self._static_bases:
            self._static_bases.move_to_end(key)
            return self._static_bases[key]
        findings: list[Finding] = []
        source = None
        if self._static_rules(text):
            findings, result = self._find(path, text)
            source = self._source(path, text, result)
        base = Base(path, text, source, findings, profiled=False)
        self._static_bases[key] = base
        while len(self._static_bases) > 16:
            self._static_bases.popitem(last=False)
        return base

    def _locate(self, path: str, text: str, sha: str) -> tuple[Base | None, frozenset, bool]:
        """(profiled base, findings already fixed in ``text``, stale?)."""
        profile = self.profile
        if profile is None or path not in profile.sources or self.config.excluded(path):
            return None, frozenset(), False
        expected = profile.sources[path]
        stripped_sha = text_sha(strip_suppressions(text))
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
                    disk = read_named_file(path, self.root)
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
        return self._anchored_base(path, text, stripped_sha)

    def _anchored_base(self, path: str, text: str, stripped_sha: str) -> tuple[Base | None, frozenset, bool]:
        """A text edited since profiling: the Profile's evidence mapped onto it, as `apply` maps
        it onto a saved file (``find`` relocates it); (None, _, True) where it cannot be (no
        profiled text kept, a file that does not parse)."""
        for (other, _), known in reversed(self._anchored.items()):  # a text this server fixed
            if other == path and known is not None:
                state = known.states.get(stripped_sha)
                if state is not None:
                    return known, state, False
        key = (path, stripped_sha)
        if key not in self._anchored:
            self._anchored[key] = self._plan_anchored(path, text, stripped_sha)
            while len(self._anchored) > 8:
                self._anchored.popitem(last=False)
        self._anchored.move_to_end(key)
        base = self._anchored[key]
        return (base, frozenset(), False) if base is not None else (None, frozenset(), True)

    def _plan_anchored(self, path: str, text: str, stripped_sha: str) -> _AnchoredBase | None:
        findings, result = self._find(path, text)
        if result is None or path in result.stale or result.profile is None:
            return None
        if result.profile.sources.get(path) != sha256_bytes(text.encode("utf-8")):
            return None  # not mapped: the file's frames stay as profiled (stale)
        source = self._source(path, text, result)
        if source is None:
            return None
        notes = [note for note in result.stale_frames if note.startswith(f"{path}:")]
        base = _AnchoredBase(path, text, source, findings, profiled=True, notes=notes)
        base.states[stripped_sha] = frozenset()
        return base

    # -- analysis -------------------------------------------------------------------------
    def analyze(self, path: str, text: str) -> Analysis:
        self.refresh()
        sha = text_sha(text)
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
        for note in base.notes if isinstance(base, _AnchoredBase) else []:
            first = analysis.lines.line_text(0)
            items.append(
                Item(
                    None, None, ((0, 0), (0, code_units(first, self.encoding))), note, "information", {"kind": "stale"}
                )
            )
        shift = self._rewrite(base, analysis.applied).edits if analysis.applied else []
        current = LineIndex(analysis.current) if analysis.applied else base.lines
        # Alternatives (``Finding.fallback``): one applied, or declined by a suppression comment,
        # ends the other too.
        done = [base.findings[i] for i in analysis.applied]
        for index, finding in enumerate(base.findings):
            if index in analysis.applied or any(stands_in_for(finding, d) or stands_in_for(d, finding) for d in done):
                continue
            start, end = self._span(base, finding)
            if shift:
                start = map_offset(shift, start, after_insertions=True)
                end = max(start, map_offset(shift, end, after_insertions=False))
            rng = (current.position(start, self.encoding), current.position(end, self.encoding))
            if is_suppressed(analysis.lines.line_text(rng[0][0]), finding.rule):
                done.append(finding)
                continue
            items.append(
                Item(
                    index,
                    finding,
                    rng,
                    diagnostic_message(finding),
                    severity_of(finding),
                    {
                        "rule": finding.rule,
                        "safety": finding.safety.value,
                        "confidence": finding.confidence,
                        "index": index,
                        "sha": analysis.sha,
                        **({"fallback": True} if finding.fallback else {}),
                    },
                )
            )
        return [i for i in items if i.finding is None or not any(stands_in_for(i.finding, d) for d in done)]

    @staticmethod
    def _span(base: Base, finding: Finding) -> tuple[int, int]:
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
    def _rewrite(self, base: Base, indices: frozenset) -> FileRewrite:
        """``rewrite()`` of these findings, exactly as `apply` calls it; each Finding's own
        Edits are computed once per base (a rule's ``fix`` depends on the Finding and the
        source alone), so growing sets of fixes cost one ``fix`` each."""
        cached = base.rewrites.get(indices)
        if cached is not None:
            return cached
        if base.source is None:  # a text that does not parse: nothing is fixed
            cached = base.rewrites[indices] = FileRewrite(path=base.path, before=base.text, after=base.text)
            return cached
        # Each a Rule in all but its fix, which it remembers (rewrite() asks nothing else).
        by_rule = cast("dict[str, Rule]", {r.id: _OnceFix(r, base) for r in self.rules})
        findings = [base.findings[i] for i in sorted(indices)]
        cached = base.rewrites[indices] = rewrite(base.path, base.source, findings, by_rule, root=self.root)
        done = {id(f) for f in cached.applied}
        fixed = frozenset(i for i in indices if id(base.findings[i]) in done)
        base.states.setdefault(text_sha(strip_suppressions(cached.after)), fixed)
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
        # The pipeline's selection without unsafe fixes: those are only ever explicit quick fixes.
        safe = {
            item.index
            for item in analysis.items
            if item.finding is not None and is_selected(item.finding, unsafe_fixes=False)
        }
        return analysis.applied | frozenset(safe)

    def fix_all(self, analysis: Analysis):
        """The edits of "fix all safe fixes in this file" (cached per text), or None."""
        if analysis._fix_all is None:
            target = self.fix_all_target(analysis)
            edits = self._edits_to(analysis, target) if target != analysis.applied else None
            analysis._fix_all = [edits]
        return analysis._fix_all[0]

    def suppress_edit(self, analysis: Analysis, item: Item) -> list[tuple[Range, str]] | None:
        if item.rule is None:
            return None  # the stale-Profile note: no rule to suppress
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
        if not analysis.parses or analysis.base.source is None:
            return []
        actions: list[Action] = []
        rules = {r.id: r for r in self.rules}
        if kind_wanted(QUICKFIX_KIND, only):
            for item in analysis.items:
                if item.finding is None or not overlaps(item.range, rng):
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
        if kind_wanted(FIX_ALL_KIND, only) and self.fix_all_target(analysis) != analysis.applied:
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
        hits = [item for item in analysis.items if contains(item.range, position)]
        if not hits:
            return None
        parts = [hover_markdown(item, {r.id: r for r in self.rules}) for item in hits]
        start = min(item.range[0] for item in hits)
        end = max(item.range[1] for item in hits)
        return "\n\n---\n\n".join(parts), (start, end)


class _OnceFix:
    """A rule whose ``fix`` remembers its Edits per Finding of one base."""

    def __init__(self, rule: Rule, base: Base):
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
