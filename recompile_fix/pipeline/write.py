"""The fix pipeline's last stages: which Findings' fixes are made (``select_fixes``), each
file's fixes as one rewrite (``rewrite_files``; ``finding_fixes``: each Finding's on its own,
for the machine-readable outputs), and the rewrites written (``write_rewrites``: atomic, compare
and swap, each remembered in the Profile's ``applied`` so a second apply changes nothing), or
shown (``diff_text``).

* A file that cannot be read or parsed, or whose fixes crash, is reported and never loses
  another file's work; a file whose bytes changed since its Findings were planned is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.edits.edit import Edit, apply_edits, unified_diff
from recompile_fix.edits.format import configured_line_length
from recompile_fix.edits.rewrite import FileRewrite, rewrite
from recompile_fix.findings.finding import Finding, Safety, stands_in_for
from recompile_fix.findings.releases import installed_torch_version
from recompile_fix.findings.rule import Rule
from recompile_fix.notebook import Notebook, NotebookError, cell_diffs, is_notebook
from recompile_fix.pipeline.lock import project_lock
from recompile_fix.pipeline.memo import DerivedCache
from recompile_fix.pipeline.paths import inside, real_file
from recompile_fix.pipeline.scan import content_digest
from recompile_fix.profile.files import read_named_file
from recompile_fix.profile.model import Profile, resolve, sha256_bytes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the comparisons at write time still hold
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FindingFix",
    "clean_stale_temps",
    "diff_text",
    "finding_fixes",
    "is_selected",
    "notebook_diff",
    "rewrite_files",
    "select_fixes",
    "write_rewrites",
]

_CHANGED_MEANWHILE = "changed while it was being fixed (another run at the same time?); not changed"


# -- select ----------------------------------------------------------------------------------


def is_selected(finding: Finding, *, unsafe_fixes: bool) -> bool:
    """Is this Finding's fix made? Safe fixes always; unsafe ones only when asked (never in an
    editor's fix-all); a Finding with no fix never."""
    return finding.safety is Safety.SAFE or (finding.safety is Safety.UNSAFE and unsafe_fixes)


def select_fixes(findings: Iterable[Finding], *, unsafe_fixes: bool) -> list[Finding]:
    """The selected fixes, less a fallback whose preferred fix is selected too (one fix each)."""
    chosen = [f for f in findings if is_selected(f, unsafe_fixes=unsafe_fixes)]
    return [f for f in chosen if not (f.fallback and any(stands_in_for(f, other) for other in chosen))]


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
    reals = {path: real_file(path, root) for path in {f.file for f in fixes}}
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
    return _together_across_files(rewrites, failed, by_file, by_rule, root, memo), failed


_LEFT_OUT_ELSEWHERE = "fixed together with a change in another file whose fix is left out"


def _together_across_files(
    rewrites: list[FileRewrite],
    failed: list[tuple[str, str]],
    by_file: dict[str, list[Finding]],
    rules: dict[str, Rule],
    root: Path,
    memo: DerivedCache | None,
) -> list[FileRewrite]:
    """Findings a rule fixes together (``params["together"]``) may lie in several files (an
    attribute assigned in `model.py` and in `train.py`): where one is left out in one file (or
    its file could not be rewritten), the others are left out in theirs, and those files are
    rewritten without them. Within a file, ``rewrite`` already holds them together."""
    failed_paths = {path for path, _ in failed}
    for _ in range(len(rewrites) + 1):  # each round only adds keys: it settles
        held = {f.params.get("together") for r in rewrites for f, _ in r.skipped} | {
            f.params.get("together") for path in failed_paths for f in by_file.get(path, [])
        }
        held.discard(None)
        redo = [r for r in rewrites if any(f.params.get("together") in held for f in r.applied)]
        if not redo:
            return rewrites
        for old in redo:
            kept = [f for f in by_file[old.path] if f.params.get("together") not in held]
            dropped = [f for f in by_file[old.path] if f.params.get("together") in held]
            source = SourceFile.read(Path(old.path), old.before.encode("utf-8"), parse=False)
            new = _rewrite_memo(old.path, source, kept, rules, root, memo)
            new.skipped.extend((f, _LEFT_OUT_ELSEWHERE) for f in dropped)
            by_file[old.path] = kept
            rewrites[rewrites.index(old)] = new
    return rewrites


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
            # a Profile's torch where the Findings came from one, else static mode's
            "torch": sorted({f.torch_version or str(installed_torch_version(root)) for f in findings}),
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
                for name in names.get(real_file(file_rewrite.path, root), []):
                    profile.applied[name] = written
    return unwritten


def _names_by_file(names: Iterable[str], root: Path) -> dict[Path, list[str]]:
    """The project's files among ``names``, by the file each names (links followed): a link
    inside the project and its target are one file with two names."""
    by_file: dict[Path, list[str]] = {}
    top = str(root.resolve())
    for name in names:
        if os.path.isabs(name) and not (name == top or name.startswith(top + os.sep)):
            continue  # a library's file: never written
        by_file.setdefault(real_file(name, root), []).append(name)
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
        if not inside(target, [root.resolve()]):
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
