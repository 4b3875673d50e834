"""Running the command under the recorder, in the user's tree or a copy, and reading back what
each compiled callable returned."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import recompile_fix
from recompile_fix.errors import UserError
from recompile_fix.profile import scratch, warm
from recompile_fix.profile.compiled_outputs import (
    CALLS_ENV,
    DEFAULT_CALLS,
    FAIL_ON_RECOMPILE_ENV,
    OUTPUTS_ENV,
    TensorRef,
    compare,
    load_refs,
)
from recompile_fix.profile.compiled_outputs import load as load_outputs
from recompile_fix.profile.libraries import is_python
from recompile_fix.profile.model import Location, Profile, relative_to_root
from recompile_fix.profile.run import resolve_command, run_profiled
from recompile_fix.progress import Progress
from recompile_fix.verify.tree import Checkout, command_in, through_links

__all__ = ["CallableOutputs", "Run", "check_before", "check_copy_used", "judge_pairs", "respell", "run_command"]

_PACKAGE_DIR = Path(recompile_fix.__file__).resolve().parent


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
    outputs: list[list]  # tensors, or TensorRefs where this process has no torch
    skipped: int = 0  # tensors not compared (subclasses, sparse, meta)
    interpreter: str | None = None  # with TensorRefs: the interpreter that compares them

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
    checkout: Checkout | None = None  # where it ran
    original_sources: list[str] = dataclasses.field(default_factory=list)  # as recorded, before respell
    kept: Any = None  # the directory of the recorded tensors, where this process has no torch

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


def _spelling(run_at: Checkout, user: Checkout | None) -> Callable[[str], str]:
    """How the Profile of a run in ``run_at`` spells a path the run recorded: as the user's
    tree does (``user``, when ``run_at`` is a copy of it): relative to where the command runs
    when under it, else absolute in the user's tree. A file the copy links to (a virtualenv's)
    is spelled as in the user's tree."""
    cwd = str(run_at.cwd)
    spelled_from = user or run_at

    def spell(path: str) -> str:
        if not os.path.isabs(path):
            path = os.path.join(cwd, path)
        if user is not None:
            path = user.from_copy(run_at, path)
        return relative_to_root(path, str(spelled_from.cwd))

    return spell


def respell(profile: Profile, spell: Callable[[str], str]) -> None:
    """Every path of the Profile, spelled again (``_spelling``)."""

    def location(loc: Location | None) -> Location | None:
        return None if loc is None else dataclasses.replace(loc, file=spell(loc.file))

    for frame in profile.frames:
        frame.file = spell(frame.file)
        for compile_ in frame.compiles:
            compile_.stack = [loc for loc in map(location, compile_.stack) if loc is not None]
            for reason in compile_.reasons:
                reason.first_use = location(reason.first_use)
        for graph_break in frame.graph_breaks:
            graph_break.location = location(graph_break.location) or graph_break.location
    profile.sources = {spell(path): digest for path, digest in profile.sources.items()}
    profile.applied = {spell(path): digest for path, digest in profile.applied.items()}
    profile.import_paths = [spell(path) for path in profile.import_paths]


def _outputs(
    records: list[dict], spell: Callable[[str], str], interpreter: str | None = None
) -> tuple[dict[str, CallableOutputs], bool]:
    outputs: dict[str, CallableOutputs] = {}
    truncated = False
    for record in sorted(records, key=lambda r: (r.get("rank", -1), r.get("pid", 0))):
        truncated |= bool(record.get("truncated"))
        prefix = f"rank{record['rank']}:" if record.get("rank", -1) >= 0 else ""
        for entry, calls in zip(record["callables"], record["outputs"]):
            file = spell(entry["file"])
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
                interpreter=interpreter,
            )
    return outputs, truncated


def run_command(
    command: list[str],
    *,
    at: Checkout,
    backend: str | None,
    log: Path,
    calls: int = DEFAULT_CALLS,
    fail_on_recompile: bool = False,
    user: Checkout | None = None,
    progress: Progress | None = None,
    label: str = "",
) -> Run:
    """Run the command under the recorder from ``at.cwd``, keeping the first ``calls`` outputs of
    each compiled callable. ``user``: the user's tree when ``at`` is a copy of it: absolute paths
    into it (in the command and in PYTHONPATH) point into the copy instead, and the Profile
    spells every path as the user's tree does. The program's stdout and stderr go to ``log``;
    ``progress`` shows the run as ``label``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    warm.enable()  # verify and fix run the program again and again: each later run skips `import torch`
    progress = progress or Progress(enabled=False)
    kept = None
    with scratch.scratch_dir("outputs") as out:
        env = {OUTPUTS_ENV: out, CALLS_ENV: str(calls), FAIL_ON_RECOMPILE_ENV: "1" if fail_on_recompile else "0"}
        # cuBLAS is deterministic only with a fixed workspace (read when CUDA starts, in the program).
        env["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if user is not None and os.environ.get("PYTHONPATH"):  # entries into the tree: the copy's
            env["PYTHONPATH"] = os.pathsep.join(
                command_in(os.environ["PYTHONPATH"].split(os.pathsep), user.root, at.root)
            )
        if user is not None:
            command = through_links(command_in(command, user.root, at.root), user.cwd, at.cwd)
        with open(log, "wb") as fh, progress.run(label or f"running `{' '.join(command)}`", log) as shown:
            profile, code = run_profiled(
                command, backend=backend, cwd=str(at.cwd), root=str(at.cwd), env=env, output=fh
            )
            run = Run(profile=profile, exit_code=code, outputs={}, root=at.cwd, log=log)
            shown.finish(code, run.exception)
        spell = _spelling(at, user)
        if _HAS_TORCH and not warm.available():
            run.outputs, run.truncated = _outputs(load_outputs(out), spell)
        else:
            # Kept as files, compared where torch is imported already: a child of the warm
            # server that ran the program (this process then never imports torch: 2-3 s of CPU
            # a command), or the user's interpreter where recompile-fix has no torch of its own.
            # Not the `.owner` file: a copy of it no one holds reads as a dead owner's to another
            # recompile-fix process's sweep, which would remove the files before they are judged.
            kept = scratch.KeptDir("outputs")
            shutil.copytree(out, kept.name, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".owner"))
            run.outputs, run.truncated = _outputs(load_refs(kept.name), spell, interpreter=_interpreter_of(command))
    run.kept = kept
    run.checkout, run.original_sources = at, list(run.profile.sources)
    respell(run.profile, spell)
    return run


# recompile-fix may run without torch (pipx, `uv tool`): then the recorded tensors stay in files
# and the user's interpreter, the one with torch, compares them (compiled_outputs.judge_main).
_HAS_TORCH = importlib.util.find_spec("torch") is not None


def _interpreter_of(command: list[str]) -> str:
    """The interpreter that ran the command, as an absolute path (the judge runs from a folder of
    its own): the first python on PATH for a launcher, or for a notebook."""
    try:
        argv = resolve_command(command)
    except UserError:  # `fix -- train.ipynb`: no command, the notebook runs under that python
        argv = [""]
    if is_python(argv[0]):
        return os.path.abspath(argv[0]) if os.sep in argv[0] else argv[0]
    return shutil.which("python") or shutil.which("python3") or sys.executable


# Run from its folder, which holds a link to this package: sys.path[0] finds it.
_JUDGE = "import sys\nfrom recompile_fix.profile.compiled_outputs import judge_main\njudge_main(sys.argv[1])\n"


def judge_pairs(pairs: list[tuple[Any, Any]], tolerance: Any, interpreter: str | None) -> list[tuple]:
    """(same?, max abs difference, what differs) per (before, after) pair of recorded tensors:
    here when they are tensors, in ``interpreter`` (one subprocess for all) when they are
    TensorRefs."""
    if not pairs:
        return []
    if not isinstance(pairs[0][0], TensorRef):
        return [compare(b, a, exact=tolerance.exact, rtol=tolerance.rtol, atol=tolerance.atol) for b, a in pairs]
    request = {"pairs": pairs, "exact": tolerance.exact, "rtol": tolerance.rtol, "atol": tolerance.atol}
    with scratch.scratch_dir("judge") as tmp:
        # Only the package on the path (no sitecustomize: no recorder): compiled_outputs needs
        # the standard library and torch.
        (Path(tmp) / "recompile_fix").symlink_to(_PACKAGE_DIR, target_is_directory=True)
        (Path(tmp) / "request.json").write_text(json.dumps(request), encoding="utf-8")
        (Path(tmp) / "judge.py").write_text(_JUDGE, encoding="utf-8")
        argv = [interpreter or sys.executable, str(Path(tmp) / "judge.py"), "request.json"]
        # The runs' server (the same interpreter and environment) forks it with torch imported.
        env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8")}
        warm_done = warm.run_captured(argv, env=env, cwd=tmp)
        if warm_done is not None and warm_done[0] == 0:
            done = subprocess.CompletedProcess(argv, *warm_done)
        else:  # no server, or a server's child that failed: the user's interpreter as it starts
            path = os.pathsep.join(p for p in (tmp, os.environ.get("PYTHONPATH", "")) if p)
            done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, env={**os.environ, "PYTHONPATH": path})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"could not compare the recorded outputs with {interpreter}: {last}")
    return [tuple(result) for result in json.loads(done.stdout)]


def check_before(run: Run) -> None:
    if run.exit_code != 0:
        what = f": {run.exception}" if run.exception else ""
        raise UserError(
            f"the command failed on your tree as it is (exit code {run.exit_code}{what}); "
            f"its output is in {run.log}; verify needs a command that runs"
        )


def check_copy_used(run: Run, user: Checkout) -> None:
    """After the fixes, the program must have run the copy's files, not the user's (files the
    copy only links to, such as a virtualenv's, are the same either way). Call it before the
    run's paths are spelled as the user's (``run.original_sources``)."""
    assert run.checkout is not None
    tree, root = str(run.checkout.root), str(user.root)
    original = [
        p
        for p in run.original_sources
        if os.path.isabs(p)
        and p.startswith(root + os.sep)
        and os.path.realpath(os.path.join(tree, os.path.relpath(p, root))).startswith(tree + os.sep)
    ]
    if original:
        raise UserError(
            f"the command ran {original[0]} from your tree, not the rewritten copy "
            "(an editable install, or an absolute path in PYTHONPATH?); nothing was verified"
        )
