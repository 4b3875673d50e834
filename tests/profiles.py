"""Profiles for tests, built by hand in the tool's own model (no torch run): a frame that compiled
once and then once per guard failure, a Profile of such frames, and a project on disk whose files
the Profile hashed (so ``Project.source`` serves them, as it serves a profiled file).

    frame = frame_of(["c == 0.5"], ["c == 1.5"], name="fn", file="program.py", first_line=4)
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, frame)
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recompile_fix.analysis.project import Project
from recompile_fix.profile.model import Compile, Frame, Profile, Reason, sha256_bytes
from recompile_fix.profile.reasons import parse_reasons

__all__ = ["frame_of", "profile_of", "project_of", "reasons_of", "write_files"]


def reasons_of(failures: Sequence[str | Reason]) -> list[Reason]:
    """Typed reasons: a guard text as torch words it (parsed as the recorder parses it), or a
    Reason as it is."""
    return [r for failure in failures for r in ([failure] if isinstance(failure, Reason) else parse_reasons(failure))]


def frame_of(
    *failures: Sequence[str | Reason],
    name: str = "fn",
    file: str = "program.py",
    first_line: int = 1,
    limit: bool = False,
    graph: int = 0,
    **compile_fields: Any,
) -> Frame:
    """A frame compiled once, then recompiled on the guard failures of ``failures[n]`` (guard
    texts or Reasons, one per cache entry, newest first as torch lists them); with ``limit``, a
    last attempt refused at the recompile limit. ``compile_fields`` (``stack``, ``seconds``,
    ``inputs``...) go into every compile; ``graph`` is the compile ids' first number."""
    compiles = [Compile(id=f"{graph}/0", **compile_fields)]
    for n, failure in enumerate(failures, start=1):
        compiles.append(Compile(id=f"{graph}/{n}", reasons=reasons_of(failure), **compile_fields))
    if limit:
        compiles.append(Compile(id=f"{graph}/{len(failures) + 1}", limit_hit=True, **compile_fields))
    return Frame(file=file, first_line=first_line, name=name, compiles=compiles)


def profile_of(
    *frames: Frame,
    command: Sequence[str] = ("python", "program.py"),
    torch_version: str | None = "2.13.0",
    python_version: str = "3.11",
    **fields: Any,
) -> Profile:
    """A Profile of ``frames`` as a run of ``command`` on ``torch_version`` records it;
    ``fields`` sets the rest (``sources``, ``trains``, ``backend``...)."""
    return Profile(
        command=list(command),
        torch_version=torch_version,
        python_version=python_version,
        frames=list(frames),
        **fields,
    )


def write_files(root: Path, files: dict[str, str], *, dedent: bool = False) -> dict[str, str]:
    """Write ``files`` (path -> text) under ``root``: path -> the sha256 a Profile keeps of each."""
    sources = {}
    for name, text in files.items():
        if dedent:
            text = textwrap.dedent(text).lstrip("\n")
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        sources[name] = sha256_bytes(text.encode())
    return sources


def project_of(
    root: Path, files: dict[str, str], *frames: Frame, dedent: bool = False, **fields: Any
) -> tuple[Profile, Project]:
    """``files`` written under ``root``, a Profile of ``frames`` that hashed them (run as
    ``python`` + the first file), and the Project that serves them as profiled."""
    sources = write_files(root, files, dedent=dedent)
    fields.setdefault("command", ["python", next(iter(files))])
    profile = profile_of(*frames, sources=sources, **fields)
    return profile, Project(root, expected_hashes=sources)
