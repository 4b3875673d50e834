"""Static mode over many files, fast: the rules that see their pattern in the source alone.

* A file none of whose enabled rules' trigger substrings occur in is never parsed.
* Files are scanned in a process pool (one process per core by default).
* Results, including "nothing here", are cached by file content (a digest of its bytes, cheap
  next to parsing), tool version and configuration, so a re-run over an unchanged tree parses
  nothing; a file edited back to its old size and mtime is still scanned again.
* A warm run reads no file whose status (size, mtime, ctime, inode) is the one recorded with its
  entry, as git's index does: only a status taken when the file was last changed well before
  (``_SETTLED_NS``) is recorded, so an edit in the same clock tick cannot pass for no edit, and
  ctime, which no program sets back, changes with every write.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import recompile_fix
from recompile_fix.cache_folder import make_cache_folder
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.releases import installed_torch_version
from recompile_fix.findings.rule import Rule
from recompile_fix.notebook import source_of
from recompile_fix.pipeline.paths import relative_to
from recompile_fix.pipeline.training import TrainingFact, training_fact
from recompile_fix.profile.files import read_bounded
from recompile_fix.tool_code import code_digest

__all__ = [
    "CACHE_FILE",
    "CacheEntry",
    "code_digest",
    "content_digest",
    "Scanned",
    "StaticScan",
]

# A file's cache entry: [content digest, its findings as JSON, its status or None (``_status``),
# what it says to the training search (``training_fact``)].
CacheEntry = list[Any]
# What scanning one file gives: (relative path, content digest, findings as JSON, error, training fact).
Scanned = tuple[str, str | None, list[dict[str, Any]], str | None, TrainingFact]

CACHE_FILE = ".recompile-fix/cache/static.json"
# Format 3: entries keyed by content, with the status that spares a warm run the read (format 1
# keyed them by mtime and size, 2 by content alone).
_CACHE_FORMAT = "3"
# A status is recorded only for a file last changed this long before the scan began: a later
# write within a coarse clock's tick would leave its times as they were.
_SETTLED_NS = 3_000_000_000


def _status(path: str | os.PathLike[str]) -> list[int] | None:
    """What a file's status says of its bytes: changed bytes change it (ctime with every write)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def content_digest(data: bytes) -> str:
    """The digest a file's bytes are known by: its cache entry, and what its Findings were planned
    from (a rewrite of other bytes is refused)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# -- worker side ---------------------------------------------------------------------------
_RULES: list[Rule] = []


def _init_worker(rule_ids: list[str], rules: Iterable[Rule] | None = None) -> None:
    global _RULES
    # What is loaded now lives as long as the process: no collection need walk it again.
    gc.freeze()
    if rules is None:
        from recompile_fix.rules import ALL_RULES

        rules = [r for r in ALL_RULES if r.id in rule_ids]
    _RULES = list(rules)


def _scan_one(path: str, relative: str, text: str | None = None) -> Scanned:
    """(relative path, content hash, findings as JSON, error) for one file; ``text``: its source
    where it is not the file on disk (an editor's buffer)."""
    # The cycle collector, left to its thresholds, walks each syntax tree while it is built and
    # read (a fifth of a cold scan); the trees hold no cycles and die with the file: one
    # collection after the file, over what is left, finds any cycle a rule made.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan_file(path, relative, text)
    finally:
        if enabled:
            gc.enable()
        gc.collect(0)


def _scan_file(path: str, relative: str, text: str | None) -> Scanned:
    from recompile_fix.analysis.source import SourceError, SourceFile

    try:
        # A .py link to /dev/zero in the tree: refused.
        data = text.encode("utf-8") if text is not None else source_of(path, read_bounded(path))
    except OSError as exc:
        return relative, None, [], f"{relative}: cannot read: {exc.strerror}", None
    except UserError as exc:  # a notebook that is not one
        return relative, None, [], str(exc), None
    digest = content_digest(data)
    fact = training_fact(data) if relative.endswith(".py") else None
    candidates = [r for r in _RULES if r.may_fire(data)]
    if not candidates:
        return relative, digest, [], None, fact
    try:
        # Not parsed yet: each rule asks for the tree it needs (ast for most, libcst for few).
        source = SourceFile.read(Path(relative), data, parse=False)
    except SourceError as exc:
        return relative, digest, [], str(exc), fact
    found: list[dict[str, Any]] = []
    for rule in candidates:
        try:
            found.extend(f.to_json() for f in rule.plan_static(source, relative))
        except SourceError as exc:
            return relative, digest, [], str(exc), fact
        except Exception as exc:  # one rule's crash must not lose the file's other findings
            return relative, digest, found, f"{relative}: internal error in {rule.id}: {exc!r}", fact
    return relative, digest, found, None, fact


def _scan_chunk(items: list[tuple[str, str]]) -> list[Scanned]:
    return [_scan_one(path, rel) for path, rel in items]


# -- driver --------------------------------------------------------------------------------
class StaticScan:
    def __init__(
        self, root: Path, rules: Iterable[Rule], fingerprint: str, jobs: int | None = None, use_cache: bool = True
    ):
        self.root = root
        self.rules = [r for r in rules if type(r).plan_static is not Rule.plan_static]
        self.jobs = jobs or min(os.cpu_count() or 1, 8)
        self.use_cache = use_cache
        # The rules' static findings depend on the user's torch (RF004, RF007 gate on its release);
        # asked here, before the workers fork, so they inherit the answer.
        self.key = (
            f"{_CACHE_FORMAT}:{recompile_fix.__version__}+{code_digest()}:{fingerprint}:"
            f"{','.join(sorted(r.id for r in self.rules))}:torch {installed_torch_version(root)}"
        )
        self.cache_path = root / CACHE_FILE
        self.errors: list[str] = []
        self.parsed = 0  # files that missed the cache (for the benchmark and tests)
        self.digests: dict[str, str] = {}  # relative path -> digest of the bytes its findings came from
        self.read = 0  # files read here (a warm run reads none whose status is recorded)
        # relative path -> what the file on disk says to the training search (``training_fact``)
        self.training_facts: dict[str, TrainingFact] = {}

    def _load_cache(self) -> dict[str, CacheEntry]:
        if not self.use_cache:
            return {}
        try:
            data = json.loads(self.cache_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("key") != self.key or not isinstance(data.get("files"), dict):
            return {}  # another version's, or damaged: start over
        files: dict[str, CacheEntry] = data["files"]
        return files

    def _save_cache(self, files: dict[str, CacheEntry]) -> None:
        """Atomically, under a name of its own (runs at once never write one temp file); the cache
        is optional: a full disk or a read-only directory only costs the next run its speed."""
        if not self.use_cache:
            return
        tmp = None
        try:
            make_cache_folder(self.cache_path.parent)
            fd, tmp = tempfile.mkstemp(dir=self.cache_path.parent, prefix=".static.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": self.key, "files": files}, fh)
            os.replace(tmp, self.cache_path)
        except OSError:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def run(
        self, files: list[Path], progress: bool | None = None, texts: Mapping[str, str] | None = None
    ) -> list[Finding]:
        """The static Findings of ``files``; ``texts``: a file's source where it is not the bytes on
        disk (an editor's buffer), by its path relative to the root: scanned here, never cached."""
        if not self.rules or not files:
            return []
        cache = self._load_cache()
        fresh: dict[str, CacheEntry] = {}
        results: dict[str, list[dict[str, Any]]] = {}
        todo: list[tuple[str, str]] = []
        statuses: dict[str, list[int] | None] = {}  # of the files scanned: the status to record
        buffers = []
        started = time.time_ns()
        restamped = False
        for path in files:
            rel = relative_to(path, self.root)
            if texts is not None and rel in texts:
                buffers.append((str(path), rel, texts[rel]))
                continue
            status = _status(path)
            entry = cache.get(rel)
            if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)):
                entry = None
            if entry is not None and status is not None and entry[2] == status:
                self._reuse(rel, entry, fresh, results)  # unchanged since recorded: not read
                continue
            try:
                digest = content_digest(source_of(path, read_bounded(path)))
                self.read += 1
            except UserError:  # a notebook that is not one: scanning it says so
                todo.append((str(path), rel))
                continue
            except OSError:
                continue
            settled = status if status is not None and 0 < status[2] < started - _SETTLED_NS else None
            if entry is not None and entry[0] == digest:
                if entry[2] != settled:
                    entry, restamped = [entry[0], entry[1], settled, entry[3]], True
                self._reuse(rel, entry, fresh, results)
                continue
            statuses[rel] = settled
            todo.append((str(path), rel))
        if todo:
            self.parsed = len(todo)
            show = sys.stderr.isatty() if progress is None else progress
            for rel, scanned_digest, found, error, fact in self._scan(todo, show):
                if error:
                    self.errors.append(error)
                    continue  # not cached: an error must be reported again next time
                # The digest of the bytes the worker read: the findings belong to those.
                fresh[rel] = [scanned_digest, found, statuses.get(rel), fact]
                results[rel] = found
                self.training_facts[rel] = fact
                if scanned_digest is not None:
                    self.digests[rel] = scanned_digest
        if todo or restamped or len(fresh) != len(cache):  # else the cache holds these entries already
            self._save_cache(fresh)
        if buffers:
            self.parsed += len(buffers)
            for rel, scanned_digest, found, error, _ in self._scan_buffers(buffers):
                if error:
                    self.errors.append(error)
                    continue
                results[rel] = found
                if scanned_digest is not None:
                    self.digests[rel] = scanned_digest
        findings = [Finding.from_json(f) for rel in sorted(results) for f in results[rel]]
        return findings

    def _reuse(
        self, rel: str, entry: CacheEntry, fresh: dict[str, CacheEntry], results: dict[str, list[dict[str, Any]]]
    ) -> None:
        fresh[rel] = entry
        results[rel] = entry[1]
        self.digests[rel] = entry[0]
        self.training_facts[rel] = entry[3]

    def _scan_buffers(self, buffers: list[tuple[str, str, str]]) -> list[Scanned]:
        """The open buffers, in this process (a few files, which the editor is waiting on)."""
        _init_worker([r.id for r in self.rules], self.rules)
        try:
            return [_scan_one(*buffer) for buffer in buffers]
        finally:
            gc.unfreeze()

    def _scan(self, todo: list[tuple[str, str]], show_progress: bool) -> Iterator[Scanned]:
        rule_ids = [r.id for r in self.rules]
        total = len(todo)
        if self.jobs <= 1 or total < 16:
            _init_worker(rule_ids, self.rules)
            try:
                for i, item in enumerate(todo):
                    yield _scan_one(*item)
                    if show_progress:
                        _progress(i + 1, total)
            finally:
                gc.unfreeze()
        else:
            # Largest files first, in small chunks, so both workers finish together.
            todo = sorted(todo, key=lambda item: -os.path.getsize(item[0]))
            chunks = [todo[i : i + 8] for i in range(0, total, 8)]
            done = 0
            from concurrent.futures import ProcessPoolExecutor  # only a scan with work for workers

            with ProcessPoolExecutor(self.jobs, initializer=_init_worker, initargs=(rule_ids,)) as pool:
                for batch in pool.map(_scan_chunk, chunks):
                    yield from batch
                    done += len(batch)
                    if show_progress:
                        _progress(done, total)
        if show_progress:
            sys.stderr.write("\n")


def _progress(done: int, total: int) -> None:
    sys.stderr.write(f"\rrecompile-fix: scanned {done}/{total} files")
    sys.stderr.flush()
