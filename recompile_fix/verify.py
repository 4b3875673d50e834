"""`recompile-fix verify` and `apply --verify`: prove each fix by running it.

The command runs twice, both times under the recorder (``profile_run.run_profiled``), which also
keeps what each compiled callable returned (``compiled_outputs``):

* before: on the user's tree as it is, from the project root;
* after: on a copy of the tree (``copy_tree``) with the fixes written into the copy, from the
  copy's root. The user's files are not touched.

The two Profiles are compared frame by frame. Frames are matched by (file, name) and, within
that, by order of first line (an edit shifts line numbers; a resume function's ``_at_LINE`` suffix
is ignored). The recorded tensors are compared call by call, with torch's default tolerances,
given ones, or exactly. A fix is *worse* when, after it, the command fails; a frame compiles
more often, recompiles more, hits the recompile limit more or breaks its graph more; a new frame
compiles; or a compiled callable returns different tensors (or is called a different number of
times).

``apply_verified`` first tries all the planned fixes together (two runs); when that is worse it
adds them one by one (one run each), keeping a fix only when it makes nothing worse than the
fixes kept before it. The kept set is what the last accepted run ran, so it is verified as a
whole.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.edits.rewrite import FileRewrite, rewrite
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.fix import _write_atomic, run_apply
from recompile_fix.profile.compiled_outputs import (
    CALLS_ENV,
    DEFAULT_CALLS,
    FAIL_ON_RECOMPILE_ENV,
    OUTPUTS_ENV,
)
from recompile_fix.profile.compiled_outputs import (
    load as load_outputs,
)
from recompile_fix.profile.model import Frame, Profile, relative_to_root, resolve, sha256_bytes
from recompile_fix.profile.run import run_profiled

LOG_DIR = ".recompile-fix/verify"

# -- the copy of the tree -------------------------------------------------------------------

# Left out of the copy: version control, caches, our own directory.
_SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".recompile-fix",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".ipynb_checkpoints",
}
# Linked, not copied: environments (a command like `.venv/bin/python x.py` keeps working).
_LINK_DIRS = {".venv", "venv", "node_modules"}
LINK_FILE_BYTES = 16 * 1024 * 1024  # larger non-Python files (data, checkpoints) are linked


def copy_tree(src: Path, dst: Path) -> None:
    """A copy of the project to rewrite: every file byte for byte (so the Profile's hashes hold),
    except version control, caches and ``.recompile-fix`` (left out), virtual environments and
    non-Python files over 16 MiB (symlinked to the original: read, not copied)."""
    src, dst = Path(src).resolve(), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    skip_path = dst.resolve()
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        target = dst / here.relative_to(src)
        keep = []
        for name in dirnames:
            path = here / name
            if name in _SKIP_DIRS or path == skip_path:
                continue
            if path.is_symlink():
                os.symlink(os.readlink(path), target / name)
            elif name in _LINK_DIRS or (path / "pyvenv.cfg").exists():
                os.symlink(path, target / name, target_is_directory=True)
            else:
                (target / name).mkdir()
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            path = here / name
            if path.is_symlink():
                os.symlink(os.readlink(path), target / name)
            elif not path.is_file():
                continue  # sockets, fifos
            elif not name.endswith(".py") and path.stat().st_size > LINK_FILE_BYTES:
                os.symlink(path, target / name)
            else:
                shutil.copy2(path, target / name)


def _command_in(command: list[str], root: Path, tree: Path) -> list[str]:
    """The command for the copy: absolute paths into the project point into the copy instead."""
    out = []
    for arg in command:
        if os.path.isabs(arg) and (arg == str(root) or arg.startswith(str(root) + os.sep)):
            arg = str(tree / os.path.relpath(arg, root))
        out.append(arg)
    return out


# -- planning and writing fixes -------------------------------------------------------------


def finding_key(finding: Finding) -> tuple:
    loc = finding.location
    return (finding.rule, finding.file, loc.line, loc.col or 0, finding.message)


def plan_fixes(
    root: Path,
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    paths=(".",),
    unsafe_fixes: bool = False,
    apply_options: dict | None = None,
) -> tuple[list[Finding], list[str]]:
    """The fixes `apply` would make under ``paths`` of ``root`` (and its per-file errors)."""
    result = run_apply(
        [str(Path(root, p)) for p in paths],
        copy.deepcopy(profile),
        rules,
        root=str(root),
        unsafe_fixes=unsafe_fixes,
        write=False,
        **(apply_options or {}),
    )
    fixes = [f for f in result.findings if f.safety is Safety.SAFE or (f.safety is Safety.UNSAFE and unsafe_fixes)]
    return fixes, list(result.errors)


def apply_fixes(root: Path, fixes: list[Finding], rules: tuple[Rule, ...], *, write: bool = True) -> list[FileRewrite]:
    """Rewrite the files of ``root`` with exactly these fixes."""
    by_rule = {rule.id: rule for rule in rules}
    by_file: dict[str, list[Finding]] = {}
    for finding in fixes:
        by_file.setdefault(finding.file, []).append(finding)
    rewrites = []
    for path, file_fixes in sorted(by_file.items()):
        file = resolve(path, root)
        source = SourceFile.read(Path(path), file.read_bytes())
        file_rewrite = rewrite(path, source, file_fixes, by_rule)
        if file_rewrite.changed:
            if write:
                _write_atomic(file, file_rewrite.after)
            rewrites.append(file_rewrite)
    return rewrites


# -- running --------------------------------------------------------------------------------


@dataclass
class CallableOutputs:
    """What one compiled callable returned in one run: per recorded call, its tensors."""

    key: str
    kind: str
    qualname: str
    name: str
    file: str
    line: int
    calls: int  # how often it was called (more than were kept)
    outputs: list[list]
    skipped: int = 0  # tensors not compared (subclasses, sparse, meta)

    @property
    def label(self) -> str:
        return f"{self.qualname} ({self.file}:{self.line})"


@dataclass
class Run:
    profile: Profile
    exit_code: int
    outputs: dict[str, CallableOutputs]
    root: Path
    log: Path
    truncated: bool = False

    @property
    def exception(self) -> str | None:
        """The program's uncaught exception, on one line (up to its traceback's "User stack")."""
        text = next((p.get("exception") for p in self.profile.processes if p.get("exception")), None)
        if text is None:
            return None
        lines = []
        for line in text.splitlines():
            if line.strip().startswith(("User stack", "Traceback", "For more information")):
                break
            if line.strip():
                lines.append(line.strip())
        one = " ".join(lines)
        return one if len(one) <= 400 else one[:399] + "\u2026"


def _spelled(path: str, root: Path, alias: Path | None) -> str:
    """A path as the Profile spells it; a file the copy links to (a virtualenv's) is spelled as
    in the user's tree."""
    if os.path.isabs(path):
        path = relative_to_root(path, str(root))
    if alias is not None and os.path.isabs(path):
        path = relative_to_root(path, str(alias))
    return path


def _outputs(records: list[dict], root: Path, alias: Path | None = None) -> tuple[dict[str, CallableOutputs], bool]:
    outputs: dict[str, CallableOutputs] = {}
    truncated = False
    for record in sorted(records, key=lambda r: (r.get("rank", -1), r.get("pid", 0))):
        truncated |= bool(record.get("truncated"))
        prefix = f"rank{record['rank']}:" if record.get("rank", -1) >= 0 else ""
        for entry, calls in zip(record["callables"], record["outputs"]):
            file = _spelled(entry["file"], root, alias)
            key = f"{prefix}{file}::{entry['qualname']}#{entry['occurrence']}"
            n = 1
            while key in outputs:  # the same callable in two processes without ranks
                key, n = f"{key.split('@', 1)[0]}@{n}", n + 1
            outputs[key] = CallableOutputs(
                key=key,
                kind=entry["kind"],
                qualname=entry["qualname"],
                name=entry["name"],
                file=file,
                line=entry["line"],
                calls=entry["calls"],
                outputs=calls,
                skipped=entry.get("skipped", 0),
            )
    return outputs, truncated


def run_command(
    command: list[str],
    *,
    cwd: Path,
    backend: str | None,
    log: Path,
    calls: int = DEFAULT_CALLS,
    fail_on_recompile: bool = False,
    alias: Path | None = None,
) -> Run:
    """Run the command in ``cwd`` under the recorder, keeping the first ``calls`` outputs of each
    compiled callable. The program's stdout and stderr go to ``log``. ``alias``: the user's tree,
    when ``cwd`` is a copy of it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="recompile-fix-outputs-") as out:
        env = {OUTPUTS_ENV: out, CALLS_ENV: str(calls), FAIL_ON_RECOMPILE_ENV: "1" if fail_on_recompile else "0"}
        if alias is not None and os.environ.get("PYTHONPATH"):  # entries into the tree: the copy's
            env["PYTHONPATH"] = os.pathsep.join(_command_in(os.environ["PYTHONPATH"].split(os.pathsep), alias, cwd))
        with open(log, "wb") as fh:
            profile, code = run_profiled(command, backend=backend, cwd=str(cwd), root=str(cwd), env=env, output=fh)
        outputs, truncated = _outputs(load_outputs(out), cwd, alias)
    for frame in profile.frames:
        frame.file = _spelled(frame.file, cwd, alias)
    return Run(profile=profile, exit_code=code, outputs=outputs, root=cwd, log=log, truncated=truncated)


def _check_before(run: Run) -> None:
    if run.exit_code != 0:
        what = f": {run.exception}" if run.exception else ""
        raise UserError(
            f"the command failed on your tree as it is (exit code {run.exit_code}{what}); "
            f"its output is in {run.log}; verify needs a command that runs"
        )


def _check_copy_used(run: Run, root: Path) -> None:
    """After the fixes, the program must have run the copy's files, not the user's (files the
    copy only links to, such as a virtualenv's, are the same either way)."""
    tree = str(run.root)
    original = [
        p
        for p in run.profile.sources
        if os.path.isabs(p)
        and p.startswith(str(root) + os.sep)
        and os.path.realpath(os.path.join(tree, os.path.relpath(p, root))).startswith(tree + os.sep)
    ]
    if original:
        raise UserError(
            f"the command ran {original[0]} from your tree, not the rewritten copy "
            "(an editable install, or an absolute path in PYTHONPATH?); nothing was verified"
        )


# -- comparing ------------------------------------------------------------------------------


@dataclass
class Tolerance:
    """How close recorded tensors must be: torch.testing.assert_close's defaults (per dtype),
    given ``rtol``/``atol`` (the other one defaults to 0), or bit for bit."""

    exact: bool = False
    rtol: float | None = None
    atol: float | None = None

    def describe(self) -> str:
        if self.exact:
            return "exactly"
        if self.rtol is None and self.atol is None:
            return "with torch.testing.assert_close's default tolerances"
        return f"with rtol={self.rtol or 0:g}, atol={self.atol or 0:g}"


def compare_tensors(before, after, tolerance: Tolerance) -> tuple[bool, float | None, str]:
    """(same?, max abs difference, what differs)."""
    import torch

    if before.shape != after.shape:
        return False, None, f"shape {tuple(before.shape)} -> {tuple(after.shape)}"
    if before.dtype != after.dtype:
        return False, None, f"dtype {before.dtype} -> {after.dtype}".replace("torch.", "")
    diff = None
    if before.numel():
        b, a = (
            before.to(torch.complex128 if before.is_complex() else torch.float64),
            after.to(torch.complex128 if after.is_complex() else torch.float64),
        )
        both_nan = b.isnan() & a.isnan()
        delta = torch.where(both_nan, torch.zeros_like(b), a - b).abs()
        delta = torch.where(delta.isnan(), torch.full_like(delta, float("inf")), delta)
        diff = float(delta.max())
    if tolerance.exact:
        same = bool(torch.equal(before, after)) or (diff == 0.0)
    else:
        kwargs = {}
        if tolerance.rtol is not None or tolerance.atol is not None:
            kwargs = {"rtol": tolerance.rtol or 0.0, "atol": tolerance.atol or 0.0}
        try:
            torch.testing.assert_close(after, before, equal_nan=True, **kwargs)
            same = True
        except AssertionError:
            same = False
    return same, diff, "" if same else f"max abs diff {diff:.3g}"


@dataclass
class OutputRow:
    key: str
    label: str
    file: str
    line: int
    calls_before: int | None
    calls_after: int | None
    compared: int = 0  # tensors compared
    same: bool = True
    max_abs_diff: float | None = None
    detail: str = ""


def compare_outputs(
    before: dict[str, CallableOutputs], after: dict[str, CallableOutputs], tolerance: Tolerance
) -> list[OutputRow]:
    rows = []
    for key in list(before) + [k for k in after if k not in before]:
        b, a = before.get(key), after.get(key)
        some = b or a
        row = OutputRow(
            key=key,
            label=some.label,
            file=some.file,
            line=some.line,
            calls_before=b.calls if b else None,
            calls_after=a.calls if a else None,
        )
        rows.append(row)
        if b is None or a is None:
            row.same = False
            row.detail = "compiled only after the fix" if b is None else "not compiled after the fix"
            continue
        if b.calls != a.calls:
            row.same = False
            row.detail = f"called {b.calls} times before, {a.calls} after"
        for i, (b_call, a_call) in enumerate(zip(b.outputs, a.outputs)):
            if len(b_call) != len(a_call):
                row.same = False
                row.detail = row.detail or f"call {i + 1}: {len(b_call)} tensors before, {len(a_call)} after"
                continue
            for j, (bt, at) in enumerate(zip(b_call, a_call)):
                same, diff, why = compare_tensors(bt, at, tolerance)
                row.compared += 1
                if diff is not None:
                    row.max_abs_diff = max(row.max_abs_diff or 0.0, diff)
                if not same:
                    if row.same or not row.detail:
                        row.detail = f"call {i + 1}, tensor {j + 1}: {why}"
                    row.same = False
    rows.sort(key=lambda r: (r.file, r.line, r.key))
    return rows


def _norm_name(name: str) -> str:
    return re.sub(r"_at_\d+$", "", name)


def frame_stats(frame: Frame) -> dict:
    return {
        "compiles": len(frame.compiles),
        "recompiles": frame.recompiles,
        "limit_hits": frame.limit_hits,
        "compile_seconds": round(frame.compile_seconds, 6),
        "graph_breaks": sum(b.count for b in frame.graph_breaks),
    }


STATS = ("compiles", "recompiles", "limit_hits", "graph_breaks")
_STAT_WORDS = {
    "compiles": "more compiles",
    "recompiles": "more recompiles",
    "limit_hits": "more recompile-limit hits",
    "graph_breaks": "more graph breaks",
}


@dataclass
class FrameRow:
    name: str
    file: str
    line_before: int | None
    line_after: int | None
    before: dict | None
    after: dict | None
    outputs: str | None = None  # "same" / "differ": outputs of the callables compiled as this frame

    @property
    def label(self) -> str:
        line = self.line_before if self.line_before is not None else self.line_after
        return f"{self.name} ({self.file}:{line})"

    def value(self, stat: str, side: str):
        data = self.before if side == "before" else self.after
        return 0 if data is None else data[stat]


def match_frames(before: Profile, after: Profile) -> list[FrameRow]:
    def groups(profile):
        out: dict[tuple, list[Frame]] = {}
        for frame in sorted(profile.frames, key=lambda f: (f.file, f.first_line, f.name)):
            out.setdefault((frame.file, _norm_name(frame.name)), []).append(frame)
        return out

    b_groups, a_groups = groups(before), groups(after)
    rows = []
    for key in list(b_groups) + [k for k in a_groups if k not in b_groups]:
        b_list, a_list = b_groups.get(key, []), a_groups.get(key, [])
        for i in range(max(len(b_list), len(a_list))):
            b = b_list[i] if i < len(b_list) else None
            a = a_list[i] if i < len(a_list) else None
            some = b or a
            rows.append(
                FrameRow(
                    name=some.name,
                    file=some.file,
                    line_before=b.first_line if b else None,
                    line_after=a.first_line if a else None,
                    before=frame_stats(b) if b else None,
                    after=frame_stats(a) if a else None,
                )
            )
    rows.sort(key=lambda r: (r.file, r.line_before if r.line_before is not None else r.line_after or 0))
    return rows


@dataclass
class Verification:
    """The before/after comparison of one set of fixes."""

    command: list[str]
    fixes: list[Finding] = field(default_factory=list)
    frames: list[FrameRow] = field(default_factory=list)
    outputs: list[OutputRow] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # files apply could not fix (stale, unparsable)
    notes: list[str] = field(default_factory=list)
    before_exit: int | None = None
    after_exit: int | None = None
    tolerance: Tolerance = field(default_factory=Tolerance)
    fail_on_recompile: bool = False
    calls: int = DEFAULT_CALLS
    ran: bool = True

    @property
    def verified(self) -> bool:
        return not self.regressions

    def total(self, stat: str, side: str):
        return sum(
            row.value(stat, side)
            if stat != "compile_seconds"
            else (getattr(row, side) or {}).get("compile_seconds", 0.0)
            for row in self.frames
        )

    def to_json(self) -> dict:
        return {
            "command": self.command,
            "verified": self.verified,
            "ran": self.ran,
            "fixes": [f.to_json() for f in self.fixes],
            "frames": [{**asdict(r), "label": r.label} for r in self.frames],
            "outputs": [asdict(o) for o in self.outputs],
            "totals": {
                s: {"before": self.total(s, "before"), "after": self.total(s, "after")}
                for s in (*STATS, "compile_seconds")
            },
            "regressions": self.regressions,
            "errors": self.errors,
            "notes": self.notes,
            "exit_code": {"before": self.before_exit, "after": self.after_exit},
            "tolerance": {**asdict(self.tolerance), "describe": self.tolerance.describe()},
            "fail_on_recompile": self.fail_on_recompile,
            "calls_recorded": self.calls,
        }


RESUME_PREFIX = "torch_dynamo_resume_in_"


def allowances(fixes: list[Finding], rules: tuple[Rule, ...]) -> set[str]:
    """What the rules of these fixes do on purpose (``Rule.verify_allows``)."""
    by_id = {rule.id: rule for rule in rules}
    return {a for f in fixes for a in getattr(by_id.get(f.rule), "verify_allows", ())}


def compare_runs(
    before: Run,
    after: Run,
    *,
    command: list[str],
    fixes: list[Finding],
    tolerance: Tolerance,
    allows: set[str] = frozenset(),
) -> Verification:
    """``allows``: "graph_breaks" and/or "resume_frames", not counted against the fixes."""
    v = Verification(
        command=list(command),
        fixes=list(fixes),
        tolerance=tolerance,
        before_exit=before.exit_code,
        after_exit=after.exit_code,
    )
    if after.exit_code != before.exit_code:
        what = f" ({after.exception})" if after.exception else ""
        v.regressions.append(
            f"the command failed after the fix: exit code {after.exit_code}{what}; its output is in {after.log}"
        )
    v.frames = match_frames(before.profile, after.profile)
    v.outputs = compare_outputs(before.outputs, after.outputs, tolerance)
    for row in v.frames:
        if row.name.startswith(RESUME_PREFIX) and "resume_frames" in allows:
            continue  # the fix splits a frame on purpose: its resume functions compile
        if row.before is None:
            v.regressions.append(f"new compiled frame: {row.label}: {row.after['compiles']} compiles")
            continue
        for stat in STATS:
            if stat == "graph_breaks" and "graph_breaks" in allows:
                continue
            b, a = row.value(stat, "before"), row.value(stat, "after")
            if a > b:
                v.regressions.append(f"{_STAT_WORDS[stat]}: {row.label}: {b} -> {a}")
    compiled = {**after.outputs, **before.outputs}
    for row in v.frames:
        # The outputs of the callables compiled as this frame (a function, or a module's forward).
        mine = [o for o in v.outputs if (compiled[o.key].file, compiled[o.key].name) == (row.file, row.name)]
        if mine:
            row.outputs = "same" if all(o.same for o in mine) else "differ"
    if after.exit_code == before.exit_code:  # after a crash, missing outputs say nothing more
        for out in v.outputs:
            if not out.same:
                v.regressions.append(f"outputs differ: {out.label}: {out.detail}")
    if before.truncated or after.truncated:
        v.notes.append("some outputs were not kept (over 256 MiB in one process): fewer calls compared")
    if not any(o.compared for o in v.outputs):
        v.notes.append("no compiled callable returned a tensor: outputs were not compared")
    return v


# -- the two commands -----------------------------------------------------------------------


def _logs(root: Path) -> Path:
    return root / LOG_DIR


def verify(
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    paths=(".",),
    backend: str | None = None,
    unsafe_fixes: bool = False,
    tolerance: Tolerance | None = None,
    fail_on_recompile: bool = False,
    calls: int = DEFAULT_CALLS,
    apply_options: dict | None = None,
) -> Verification:
    """Run ``command`` on the tree as it is and on a copy with every planned fix; compare."""
    root = Path(root or os.getcwd()).resolve()
    tolerance = tolerance or Tolerance()
    with tempfile.TemporaryDirectory(prefix="recompile-fix-verify-") as tmp:
        tree = Path(tmp) / "tree"
        copy_tree(root, tree)
        fixes, errors = plan_fixes(
            tree, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options
        )
        if not fixes:
            return Verification(
                command=list(command), errors=errors, ran=False, tolerance=tolerance, notes=["no fixes to verify"]
            )
        before = run_command(command, cwd=root, backend=backend, log=_logs(root) / "before.log", calls=calls)
        _check_before(before)
        apply_fixes(tree, fixes, rules)
        after = run_command(
            _command_in(command, root, tree),
            cwd=tree,
            backend=backend,
            alias=root,
            log=_logs(root) / "after.log",
            calls=calls,
            fail_on_recompile=fail_on_recompile,
        )
        _check_copy_used(after, root)
    v = compare_runs(before, after, command=command, fixes=fixes, tolerance=tolerance, allows=allowances(fixes, rules))
    v.errors = errors
    v.calls = calls
    v.fail_on_recompile = fail_on_recompile
    if fail_on_recompile and not _has_set_stance():
        v.notes.append("this torch has no torch.compiler.set_stance: --fail-on-recompile was not checked")
    return v


def _has_set_stance() -> bool:
    try:
        import torch.compiler
    except ImportError:
        return False
    return hasattr(torch.compiler, "set_stance")


@dataclass
class VerifiedApply:
    kept: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, list[str]]] = field(default_factory=list)  # (fix, what went wrong)
    rewrites: list[FileRewrite] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    verification: Verification | None = None  # before vs. the kept fixes
    runs: int = 0


def apply_verified(
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    *,
    root: str | os.PathLike | None = None,
    paths=(".",),
    backend: str | None = None,
    unsafe_fixes: bool = False,
    tolerance: Tolerance | None = None,
    calls: int = DEFAULT_CALLS,
    write: bool = True,
    apply_options: dict | None = None,
) -> VerifiedApply:
    """Apply to ``root`` only the fixes that verification confirms; report the others and why."""
    root = Path(root or os.getcwd()).resolve()
    tolerance = tolerance or Tolerance()
    result = VerifiedApply()
    with tempfile.TemporaryDirectory(prefix="recompile-fix-verify-") as tmp:
        snapshot = Path(tmp) / "snapshot"
        copy_tree(root, snapshot)  # before the program runs (and perhaps writes files) in the tree
        fixes, result.errors = plan_fixes(
            snapshot, profile, rules, paths=paths, unsafe_fixes=unsafe_fixes, apply_options=apply_options
        )
        if not fixes:
            return result
        logs = _logs(root)
        before = run_command(command, cwd=root, backend=backend, log=logs / "before.log", calls=calls)
        result.runs += 1
        _check_before(before)

        def trial(selected: list[Finding], n: int) -> Run:
            tree = Path(tmp) / f"trial-{n}"
            shutil.copytree(snapshot, tree, symlinks=True)
            apply_fixes(tree, selected, rules)
            run = run_command(
                _command_in(command, root, tree),
                cwd=tree,
                backend=backend,
                alias=root,
                log=logs / f"trial-{n}.log",
                calls=calls,
            )
            result.runs += 1
            _check_copy_used(run, root)
            shutil.rmtree(tree, ignore_errors=True)
            return run

        together = compare_runs(
            before, trial(fixes, 0), command=command, fixes=fixes, tolerance=tolerance, allows=allowances(fixes, rules)
        )
        if together.verified:
            result.kept, result.verification = list(fixes), together
        elif len(fixes) == 1:
            result.dropped.append((fixes[0], together.regressions))
        else:
            reference, last = before, None
            for n, fix in enumerate(fixes, 1):
                run = trial(result.kept + [fix], n)
                check = compare_runs(
                    reference,
                    run,
                    command=command,
                    fixes=[fix],
                    tolerance=tolerance,
                    allows=allowances(result.kept + [fix], rules),
                )
                if check.verified:
                    result.kept.append(fix)
                    reference = last = run
                else:
                    result.dropped.append((fix, check.regressions))
            if last is not None:
                result.verification = compare_runs(
                    before,
                    last,
                    command=command,
                    fixes=result.kept,
                    tolerance=tolerance,
                    allows=allowances(result.kept, rules),
                )
        if result.verification is not None:
            result.verification.errors = list(result.errors)
            result.verification.calls = calls
        if not result.kept:
            return result
        changed = [
            f.file
            for f in result.kept
            if sha256_bytes(resolve(f.file, root).read_bytes()) != sha256_bytes(resolve(f.file, snapshot).read_bytes())
        ]
        if changed:
            raise UserError(f"{changed[0]}: changed while the fixes were being verified; not changed")
        try:
            result.rewrites = apply_fixes(root, result.kept, rules, write=write)
        except SourceError as exc:
            raise UserError(str(exc)) from None
    if write:
        for file_rewrite in result.rewrites:
            if file_rewrite.path in profile.sources:
                profile.applied[file_rewrite.path] = sha256_bytes(file_rewrite.after.encode("utf-8"))
    return result


# -- text -----------------------------------------------------------------------------------


def _arrow(b, a, fmt=str) -> str:
    return f"{'-' if b is None else fmt(b)} -> {'-' if a is None else fmt(a)}"


def frame_table(v: Verification) -> list[str]:
    header = ("frame", "compiles", "recompiles", "limit hits", "compile s", "graph breaks", "outputs")
    rows = []
    for r in v.frames:
        cells = [r.label]
        for stat in ("compiles", "recompiles", "limit_hits"):
            cells.append(_arrow(r.before and r.before[stat], r.after and r.after[stat]))
        cells.append(
            _arrow(
                r.before and r.before["compile_seconds"], r.after and r.after["compile_seconds"], lambda s: f"{s:.2f}"
            )
        )
        cells.append(_arrow(r.before and r.before["graph_breaks"], r.after and r.after["graph_breaks"]))
        cells.append(r.outputs or "")
        rows.append(cells)
    totals = ["total"] + [
        _arrow(v.total(s, "before"), v.total(s, "after")) for s in ("compiles", "recompiles", "limit_hits")
    ]
    totals.append(
        _arrow(v.total("compile_seconds", "before"), v.total("compile_seconds", "after"), lambda s: f"{s:.2f}")
    )
    totals.append(_arrow(v.total("graph_breaks", "before"), v.total("graph_breaks", "after")))
    outputs_same = sum(1 for o in v.outputs if o.same)
    totals.append(f"{outputs_same}/{len(v.outputs)} same" if v.outputs else "")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows + [totals])) for i in range(len(header))]

    def fmt(cells):
        return "  ".join([cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return [fmt(header), rule, *(fmt(r) for r in rows), rule, fmt(totals)]


def render_text(v: Verification) -> str:
    if not v.ran:
        return "Nothing to verify: no fixes are pending.\n"
    files = len({f.file for f in v.fixes})
    lines = [
        f"Ran `{' '.join(v.command)}` on your tree and on a copy with {len(v.fixes)} fix(es) in {files} file(s):",
        "",
    ]
    lines.extend(f.describe(unsafe_fixes=True).split("\n", 1)[0] for f in v.fixes)
    lines.append("")
    lines.extend(frame_table(v))
    lines.append("")
    lines.append(f"Outputs of compiled callables (first {v.calls} calls each, compared {v.tolerance.describe()}):")
    for o in v.outputs:
        calls = _arrow(o.calls_before, o.calls_after)
        diff = f", max abs diff {o.max_abs_diff:.3g}" if o.max_abs_diff is not None else ""
        status = "same  " if o.same else "DIFFER"
        detail = f": {o.detail}" if o.detail else ""
        lines.append(f"  {status} {o.label}: calls {calls}, {o.compared} tensors{diff}{detail}")
    if not v.outputs:
        lines.append("  (no compiled callable was recorded)")
    for note in v.notes:
        lines.append(f"note: {note}")
    lines.append("")
    if v.verified:
        stance = " and nothing compiled after warm-up (fail_on_recompile)" if v.fail_on_recompile else ""
        lines.append(
            f"Verified: compiles {v.total('compiles', 'before')} -> {v.total('compiles', 'after')}, "
            f"recompiles {v.total('recompiles', 'before')} -> {v.total('recompiles', 'after')}, "
            f"outputs equal{stance}."
        )
    else:
        lines.append("Worse after the fixes:")
        lines.extend(f"  - {r}" for r in v.regressions)
    return "\n".join(lines) + "\n"


# -- the command line -----------------------------------------------------------------------


def cli_verify(
    *,
    command: list[str],
    profile: Profile,
    rules: tuple[Rule, ...],
    backend: str | None,
    unsafe_fixes: bool,
    as_json: bool,
    tolerance: Tolerance,
    html_file: str | None,
    fail_on_recompile: bool,
    calls: int,
    apply_options: dict | None = None,
) -> int:
    """`recompile-fix verify`; returns the exit code (0 verified, 1 worse, 2 error)."""
    import json

    import click

    command = list(command) or list(profile.command)
    if not command:
        raise UserError("no command to run: use `recompile-fix verify -- python train.py ...`")
    v = verify(
        command,
        profile,
        rules,
        backend=backend if backend is not None else profile.backend,
        unsafe_fixes=unsafe_fixes,
        tolerance=tolerance,
        fail_on_recompile=fail_on_recompile,
        calls=calls,
        apply_options=apply_options,
    )
    if as_json:
        click.echo(json.dumps(v.to_json(), indent=1))
    else:
        click.echo(render_text(v), nl=False)
    if html_file and v.ran:
        from recompile_fix.chart import render_html

        Path(html_file).write_text(render_html(v), encoding="utf-8")
        click.echo(f"recompile-fix: wrote {html_file}", err=True)
    for error in v.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    if not v.verified:
        return 1
    return 2 if v.errors else 0


def cli_apply_verified(
    *,
    paths: list[str],
    profile: Profile | None,
    profile_path: str,
    rules: tuple[Rule, ...],
    unsafe_fixes: bool,
    write: bool,
    show_diff: bool,
    check: bool,
    apply_options: dict | None = None,
) -> int:
    """`recompile-fix apply --verify`; returns the exit code (0 all verified and applied, 1 a fix
    was dropped or, with --check, verified fixes are pending, 2 error)."""
    import click

    from recompile_fix.pipeline.fix import diff_text

    if profile is None:
        raise UserError("apply --verify needs a Profile: it runs the command the Profile recorded")
    if not profile.command:
        raise UserError("the Profile records no command to run; use `recompile-fix verify -- CMD`")
    result = apply_verified(
        list(profile.command),
        profile,
        rules,
        paths=paths,
        backend=profile.backend,
        unsafe_fixes=unsafe_fixes,
        write=write,
        apply_options=apply_options,
    )
    if show_diff:
        from recompile_fix.pipeline.fix import ApplyResult

        click.echo(diff_text(ApplyResult(rewrites=result.rewrites)), nl=False)
    else:
        for finding in result.kept:
            click.echo(finding.describe(unsafe_fixes=True) + "\n    verified: makes nothing worse, outputs equal")
        for finding, why in result.dropped:
            click.echo(finding.describe(unsafe_fixes=True))
            click.echo("    dropped: verification shows it makes things worse:")
            click.echo("\n".join(f"      - {w}" for w in why))
        if result.verification is not None:
            click.echo("")
            click.echo("\n".join(frame_table(result.verification)))
    for error in result.errors:
        click.echo(f"recompile-fix: error: {error}", err=True)
    files = len(result.rewrites)
    verb = "Fixed" if write else "Would fix"
    summary = f"{verb} {len(result.kept)} verified finding(s) in {files} file(s)"
    if result.dropped:
        summary += f"; dropped {len(result.dropped)} that made things worse"
    summary += f" ({result.runs} runs of `{' '.join(profile.command)}`)." if result.runs else "."
    click.echo(summary, err=True)
    if write and result.rewrites:
        profile.dump(profile_path)  # remember what was applied: a second apply is a no-op
    if result.errors:
        return 2
    if result.dropped or (check and result.kept):
        return 1
    return 0
