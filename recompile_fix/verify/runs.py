"""Running the command under the recorder, in the user's tree or a copy, and reading back what
each compiled callable returned."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from recompile_fix.errors import UserError
from recompile_fix.profile.compiled_outputs import CALLS_ENV, DEFAULT_CALLS, FAIL_ON_RECOMPILE_ENV, OUTPUTS_ENV
from recompile_fix.profile.compiled_outputs import load as load_outputs
from recompile_fix.profile.model import Profile, relative_to_root
from recompile_fix.profile.run import run_profiled
from recompile_fix.verify.tree import command_in

__all__ = ["CallableOutputs", "Run", "check_before", "check_copy_used", "run_command"]


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
            env["PYTHONPATH"] = os.pathsep.join(command_in(os.environ["PYTHONPATH"].split(os.pathsep), alias, cwd))
        with open(log, "wb") as fh:
            profile, code = run_profiled(command, backend=backend, cwd=str(cwd), root=str(cwd), env=env, output=fh)
        outputs, truncated = _outputs(load_outputs(out), cwd, alias)
    for frame in profile.frames:
        frame.file = _spelled(frame.file, cwd, alias)
    return Run(profile=profile, exit_code=code, outputs=outputs, root=cwd, log=log, truncated=truncated)


def check_before(run: Run) -> None:
    if run.exit_code != 0:
        what = f": {run.exception}" if run.exception else ""
        raise UserError(
            f"the command failed on your tree as it is (exit code {run.exit_code}{what}); "
            f"its output is in {run.log}; verify needs a command that runs"
        )


def check_copy_used(run: Run, root: Path) -> None:
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
