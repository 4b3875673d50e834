"""Static mode over many files, fast: the rules that see their pattern in the source alone.

* A file none of whose enabled rules' trigger substrings occur in is never parsed.
* Files are scanned in a process pool (one process per core by default).
* Results, including "nothing here", are cached by file content (a digest of its bytes, cheap
  next to parsing), tool version and configuration, so a re-run over an unchanged tree parses
  nothing; a file edited back to its old size and mtime is still scanned again.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import recompile_fix
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.releases import installed_torch_version
from recompile_fix.findings.rule import Rule
from recompile_fix.notebook import NOTEBOOK_SUFFIX, source_of
from recompile_fix.profile.files import read_bounded
from recompile_fix.tool_code import code_digest

__all__ = [
    "CACHE_FILE",
    "CacheEntry",
    "code_digest",
    "content_digest",
    "discover",
    "is_source",
    "Scanned",
    "skipped_sources",
    "StaticScan",
]

# A file's cache entry: [content digest, its findings as JSON].
CacheEntry = list[Any]
# What scanning one file gives: (relative path, content digest, findings as JSON, error).
Scanned = tuple[str, str | None, list[dict[str, Any]], str | None]

CACHE_FILE = ".recompile-fix/cache/static.json"
_CACHE_FORMAT = "2"  # entries keyed by content alone (format 1 also keyed by mtime and size)


def content_digest(data: bytes) -> str:
    """The digest a file's bytes are known by: its cache entry, and what its Findings were planned
    from (a rewrite of other bytes is refused)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def is_source(path: str | os.PathLike[str]) -> bool:
    """Is this a file the rules read (Python source)? The one test, for a file named on the
    command line and for one found in a folder: a new kind (a notebook) is added here."""
    return Path(path).suffix in (".py", NOTEBOOK_SUFFIX)


def skipped_sources(paths: Iterable[str]) -> list[str]:
    """The files named in ``paths`` that are not sources (``is_source``): `apply` warns of each
    and skips it, as ruff does."""
    return [p for p in paths if Path(p).is_file() and not is_source(p)]


def discover(paths: list[str], root: Path, excluded: Callable[[str], bool]) -> list[Path]:
    """Python files and notebooks under ``paths``, less what the configuration excludes and, in a
    git work tree, what git ignores (as ruff does: copies in an ignored `work/`, build output); an
    explicitly named source file is always included (one that is not a source,
    ``skipped_sources``, never)."""
    files: list[Path] = []
    walked: list[Path] = []
    for given in paths:
        path = Path(given).resolve()
        if path.is_file():
            if is_source(path):
                files.append(path)
            continue
        for directory, dirnames, filenames in os.walk(path):
            rel_dir = os.path.relpath(directory, root)
            dirnames[:] = sorted(d for d in dirnames if not excluded(os.path.normpath(os.path.join(rel_dir, d))))
            for name in sorted(filenames):
                if is_source(name) and not excluded(os.path.normpath(os.path.join(rel_dir, name))):
                    walked.append(Path(directory, name))
    ignored = git_ignored(root, walked)
    return files + [f for f in walked if f not in ignored]


def git_ignored(root: Path, files: list[Path]) -> set[Path]:
    """The ``files`` git ignores (``.gitignore``, ``.git/info/exclude``, the global excludes) where
    ``root`` is in a git work tree; none where it is not, or git cannot say."""
    if not files or shutil.which("git") is None:
        return set()
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "--stdin", "-z"],
            input=b"\0".join(os.fsencode(f) for f in files),
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode not in (0, 1):  # 128: not a work tree (or git failed): nothing ignored
        return set()
    return {Path(os.fsdecode(p)) for p in done.stdout.split(b"\0") if p}


# -- worker side ---------------------------------------------------------------------------
_RULES: list[Rule] = []


def _init_worker(rule_ids: list[str], rules: Iterable[Rule] | None = None) -> None:
    global _RULES
    # Syntax trees hold no reference cycles, yet allocating millions of their nodes triggers the
    # cycle collector over and over (about half of ast.parse's time here): collect rarely.
    gc.freeze()
    gc.set_threshold(200_000, 50, 100)
    if rules is None:
        from recompile_fix.rules import ALL_RULES

        rules = [r for r in ALL_RULES if r.id in rule_ids]
    _RULES = list(rules)


def _scan_one(path: str, relative: str, text: str | None = None) -> Scanned:
    """(relative path, content hash, findings as JSON, error) for one file; ``text``: its source
    where it is not the file on disk (an editor's buffer)."""
    from recompile_fix.analysis.source import SourceError, SourceFile

    try:
        # A .py link to /dev/zero in the tree: refused.
        data = text.encode("utf-8") if text is not None else source_of(path, read_bounded(path))
    except OSError as exc:
        return relative, None, [], f"{relative}: cannot read: {exc.strerror}"
    except UserError as exc:  # a notebook that is not one
        return relative, None, [], str(exc)
    digest = content_digest(data)
    candidates = [r for r in _RULES if r.may_fire(data)]
    if not candidates:
        return relative, digest, [], None
    try:
        # Not parsed yet: each rule asks for the tree it needs (ast for most, libcst for few).
        source = SourceFile.read(Path(relative), data, parse=False)
    except SourceError as exc:
        return relative, digest, [], str(exc)
    found: list[dict[str, Any]] = []
    for rule in candidates:
        try:
            found.extend(f.to_json() for f in rule.plan_static(source, relative))
        except SourceError as exc:
            return relative, digest, [], str(exc)
        except Exception as exc:  # one rule's crash must not lose the file's other findings
            return relative, digest, found, f"{relative}: internal error in {rule.id}: {exc!r}"
    return relative, digest, found, None


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
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
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
        buffers = []
        for path in files:
            rel = os.path.relpath(path, self.root)
            if texts is not None and rel in texts:
                buffers.append((str(path), rel, texts[rel]))
                continue
            try:
                digest = content_digest(source_of(path, read_bounded(path)))
            except UserError:  # a notebook that is not one: scanning it says so
                todo.append((str(path), rel))
                continue
            except OSError:
                continue
            entry = cache.get(rel)
            if isinstance(entry, list) and len(entry) == 2 and entry[0] == digest:
                fresh[rel] = entry
                results[rel] = entry[1]
                self.digests[rel] = digest
                continue
            todo.append((str(path), rel))
        if todo:
            self.parsed = len(todo)
            show = sys.stderr.isatty() if progress is None else progress
            for rel, scanned_digest, found, error in self._scan(todo, show):
                if error:
                    self.errors.append(error)
                    continue  # not cached: an error must be reported again next time
                # The digest of the bytes the worker read: the findings belong to those.
                fresh[rel] = [scanned_digest, found]
                results[rel] = found
                if scanned_digest is not None:
                    self.digests[rel] = scanned_digest
        self._save_cache(fresh)
        if buffers:
            self.parsed += len(buffers)
            for rel, scanned_digest, found, error in self._scan_buffers(buffers):
                if error:
                    self.errors.append(error)
                    continue
                results[rel] = found
                if scanned_digest is not None:
                    self.digests[rel] = scanned_digest
        findings = [Finding.from_json(f) for rel in sorted(results) for f in results[rel]]
        return findings

    def _scan_buffers(self, buffers: list[tuple[str, str, str]]) -> list[Scanned]:
        """The open buffers, in this process (a few files, which the editor is waiting on)."""
        thresholds = gc.get_threshold()
        _init_worker([r.id for r in self.rules], self.rules)
        try:
            return [_scan_one(*buffer) for buffer in buffers]
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    def _scan(self, todo: list[tuple[str, str]], show_progress: bool) -> Iterator[Scanned]:
        rule_ids = [r.id for r in self.rules]
        total = len(todo)
        if self.jobs <= 1 or total < 16:
            thresholds = gc.get_threshold()
            _init_worker(rule_ids, self.rules)
            try:
                for i, item in enumerate(todo):
                    yield _scan_one(*item)
                    if show_progress:
                        _progress(i + 1, total)
            finally:
                gc.set_threshold(*thresholds)
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
