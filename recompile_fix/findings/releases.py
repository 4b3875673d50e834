"""Which torch release runs what a rule writes. Each rule declares, in ``Rule.emits``, every torch
API its fixes insert (or its notes suggest) and the first release that has it; its own gates read
those declarations, ``check_edits`` refuses an edit that names an API the Finding's release lacks
(the Profile's torch, or in static mode the installed one), and ``release_table`` renders them
as docs/torch-releases.md (a test keeps that file equal to it).

Boundaries are the first release seen to have the API: measured on 2.6.0, 2.8.0, 2.10.0, 2.13.0,
2.14.1 and 2.15.0 (issue 18), else taken from the PyTorch change that added it (``checked``).
An unmeasured release in between counts as not having it, so no edit is made there.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recompile_fix.cache_folder import make_cache_folder
from recompile_fix.profile.model import torch_release

if TYPE_CHECKING:  # names only: a Rule declares TorchApis, this module reads them
    from recompile_fix.edits.edit import Edit
    from recompile_fix.findings.rule import Rule

__all__ = [
    "DYNAMIC_FLOATS",
    "DYNAMIC_SOURCES",
    "RELEASES",
    "AskedVersion",
    "TorchApi",
    "check_edits",
    "asked_torch_version",
    "installed_torch_version",
    "profiled_torch",
    "release_table",
    "user_python",
    "user_torch_version",
]

# The releases the table shows: the oldest users run to the newest on the package index.
RELEASES: tuple[tuple[int, int], ...] = tuple((2, minor) for minor in range(4, 16))


@dataclass(frozen=True)
class TorchApi:
    """One thing a rule writes into the user's code (``use="code"``) or suggests in a note
    (``use="note"``), and the first release that runs it (None: every release in RELEASES)."""

    name: str  # as written, ``torch.`` first: torch.compiler.nested_compile_region
    since: tuple[int, int] | None
    checked: str  # where the boundary comes from
    use: str = "code"
    # A semantic gate (what a release does with the code, not whether the name exists) is not
    # looked for in edit text: the rule applies it itself.
    in_text: bool = True

    def runs_on(self, release: tuple[int, int] | None) -> bool:
        return self.since is None or (release is not None and release >= self.since)

    @property
    def since_text(self) -> str:
        return "any" if self.since is None else f"{self.since[0]}.{self.since[1]}"

    def pattern(self) -> re.Pattern[str]:
        """The name as an edit spells it, whatever the file calls torch (``th.compiler.x``)."""
        rest = self.name.split(".", 1)[1] if self.name.startswith("torch.") else self.name
        return re.compile(r"(?<![\w.])\w+\." + re.escape(rest) + r"\b")


# The torch of the run the pipeline's Profile recorded, while ``profiled_torch`` holds it: the
# tree runs on that torch, whatever `python` on PATH is now (a shim, another environment).
_PROFILED_TORCH: str | None = None


@contextmanager
def profiled_torch(version: str | None) -> Iterator[None]:
    """Within it, ``installed_torch_version`` is ``version`` (a Profile's; None: static mode's)."""
    global _PROFILED_TORCH
    before, _PROFILED_TORCH = _PROFILED_TORCH, version
    try:
        yield
    finally:
        _PROFILED_TORCH = before


def installed_torch_version(root: str | os.PathLike[str] | None = None) -> str | None:
    """The release the tree's edits are for: the Profile's torch where the pipeline read one, else
    static mode's (``asked_torch_version``)."""
    if _PROFILED_TORCH is not None:
        return _PROFILED_TORCH
    return asked_torch_version(None if root is None else str(root))


@functools.cache
def asked_torch_version(root: str | None = None) -> str | None:
    """Static mode's release: the torch of the user's interpreter, the one ``profile`` would run
    (the first ``python`` on PATH), asked without importing torch in either process; the tool
    may be installed apart (pipx) with another torch or none. Kept in ``root``'s
    ``.recompile-fix/cache/`` per interpreter (its path and mtime, and its import folders'
    mtimes); when the interpreter cannot be asked, this tool's own environment's, said in one line."""
    asked = user_torch_version(root)
    if asked.ok and asked.version is not None:
        return asked.version
    own = _own_torch_version()
    if asked.ok and own is None:
        return None  # neither has torch: nothing to say that check_edits does not
    if asked.ok:  # an interpreter without torch cannot run the program: most likely not the user's
        asked = AskedVersion(False, why=f"{user_python()} (the first `python` on PATH) has no torch")
    if asked.why not in _SAID:
        _SAID.add(asked.why)
        print(
            f"recompile-fix: {asked.why}: static mode uses this tool's own torch ({own or 'none installed'})",
            file=sys.stderr,
        )
    return own


# What this process was told, by interpreter (a scan's workers, forked, inherit it), and the
# fallback lines already said.
_ASKED: dict[tuple[str, int, str], AskedVersion] = {}
_SAID: set[str] = set()


def _own_torch_version() -> str | None:
    """This environment's torch version, read from ``torch/version.py`` (found, not imported:
    1 ms, where importlib.metadata reads every installed package's metadata, about 40 ms)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            text = Path(folder, "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        if found:
            return found.group(1)
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


# torch.compiler.config.dynamic_sources names one source (RF006's module int, RF002's int
# argument used as a size); it arrived in torch 2.7 (pytorch#147979).
DYNAMIC_SOURCES = TorchApi(
    "torch.compiler.config.dynamic_sources", (2, 7), "measured: absent 2.6.0, present 2.8.0; 2.7 from pytorch#147979"
)

# What `dynamic=True` at a compile call does for a Python float argument or attribute (RF002,
# RF003): traced as a float input from the first compile, not specialised on its value.
DYNAMIC_FLOATS = TorchApi(
    "torch.compile(dynamic=True) tracing a float as an input",
    (2, 6),
    "pytorch#137782 (specialize_float=False by default); measured 2.13.0, 2.14.1",
    in_text=False,
)


@dataclass(frozen=True)
class AskedVersion:
    """What the user's interpreter said: ``ok`` with its torch version (None: no torch there),
    or why it could not be asked."""

    ok: bool
    version: str | None = None
    why: str = ""


TORCH_VERSIONS_CACHE = ".recompile-fix/cache/torch-versions.json"
ASK_TIMEOUT_S = 15.0  # an interpreter's start and importlib.metadata: 0.1 s idle, more on a busy host
# Prints the torch version (or null) and the import path, as JSON; importing torch is never needed.
_PROBE = (
    "import importlib.metadata as m, json, sys\n"
    "try:\n    v = m.version('torch')\nexcept m.PackageNotFoundError:\n    v = None\n"
    "print(json.dumps({'torch': v, 'path': [p for p in sys.path if p]}))"
)


def user_python() -> str | None:
    """The interpreter ``profile -- python ...`` runs: the first ``python`` (or ``python3``) on PATH."""
    return shutil.which("python") or shutil.which("python3")


def user_torch_version(root: str | os.PathLike[str] | None = None) -> AskedVersion:
    """The torch version of the user's interpreter (``user_python``), from the cache under
    ``root`` when the interpreter and its import folders are unchanged since it was asked."""
    python = user_python()
    if python is None:
        return AskedVersion(False, why="no `python` on PATH to ask for its torch version")
    python = os.path.abspath(python)
    if os.path.dirname(python) == os.path.dirname(os.path.abspath(sys.executable)):
        return AskedVersion(True, _own_torch_version())  # the tool runs in the user's environment
    try:
        stamp = os.stat(python).st_mtime_ns
    except OSError as exc:
        return AskedVersion(False, why=f"cannot read {python}: {exc.strerror}")
    memo_key = (python, stamp, _environment())
    if memo_key not in _ASKED or not _ASKED[memo_key].ok:
        _ASKED[memo_key] = _ask(python, stamp, root)
    return _ASKED[memo_key]


def _environment() -> str:
    """What else picks the interpreter's packages: a shim's version (pyenv), an activated
    environment, the import path."""
    return "\0".join(
        os.environ.get(name, "") for name in ("PYTHONPATH", "PYENV_VERSION", "VIRTUAL_ENV", "CONDA_PREFIX")
    )


def _ask(python: str, stamp: int, root: str | os.PathLike[str] | None) -> AskedVersion:
    cache_file = Path(root, TORCH_VERSIONS_CACHE) if root is not None else None
    entries = _read_cache(cache_file)
    key = f"{python}\0{_environment()}"
    known = entries.get(key)
    if isinstance(known, dict) and known.get("mtime") == stamp and _folders_unchanged(known.get("folders")):
        version = known.get("torch")
        return AskedVersion(True, version if isinstance(version, str) else None)
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return AskedVersion(False, why=f"{python} did not say its torch version within {ASK_TIMEOUT_S:g} s")
    except OSError as exc:
        return AskedVersion(False, why=f"cannot run {python}: {exc.strerror}")
    answer = _parse_answer(done.stdout) if done.returncode == 0 else None
    if answer is None:
        return AskedVersion(False, why=f"{python} did not say its torch version (exit {done.returncode})")
    version, path = answer
    if cache_file is not None:
        entries[key] = {"mtime": stamp, "torch": version, "folders": _folder_stamps(path)}
        _write_cache(cache_file, entries)
    return AskedVersion(True, version)


def _parse_answer(stdout: str) -> tuple[str | None, list[str]] | None:
    lines = stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    version, path = data.get("torch"), data.get("path")
    if version is not None and not (isinstance(version, str) and re.match(r"\d+\.\d+", version)):
        return None
    if not isinstance(path, list):
        path = []
    return version, [p for p in path if isinstance(p, str)]


def _folder_stamps(path: list[str]) -> dict[str, int | None]:
    """The mtime of each import folder: installing, upgrading or removing torch changes its
    site-packages folder's (a dist-info folder comes or goes)."""
    stamps: dict[str, int | None] = {}
    for folder in path:
        try:
            stamps[folder] = os.stat(folder).st_mtime_ns
        except OSError:
            stamps[folder] = None
    return stamps


def _folders_unchanged(known: object) -> bool:
    if not isinstance(known, dict):
        return False
    return all(isinstance(folder, str) and _folder_stamps([folder])[folder] == stamp for folder, stamp in known.items())


def _read_cache(path: Path | None) -> dict[str, object]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, entries: dict[str, object]) -> None:
    """Atomically; a cache that cannot be written only costs the next run a question."""
    tmp = None
    try:
        make_cache_folder(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".torch-versions.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entries, handle)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def check_edits(rule: Rule, edits: list[Edit], torch_version: str | None) -> str | None:
    """Why these edits must not be written for ``torch_version``, or None. An API whose
    boundary is not "any" needs a known release at or after it."""
    release = torch_release(torch_version)
    text = "".join(edit.new_text for edit in edits)
    for api in rule.emits:
        if api.use != "code" or not api.in_text or api.runs_on(release):
            continue
        if api.pattern().search(text):
            have = f"torch {torch_version}" if torch_version else "an unknown torch version"
            return f"{have} has no `{api.name}` (it arrived in {api.since_text}): not written"
    return None


def release_table(rules: tuple[Rule, ...]) -> str:
    """docs/torch-releases.md: per rule, what it writes (or suggests) on which release."""
    header = ["rule", "API", "use", "since", *(f"{major}.{minor}" for major, minor in RELEASES), "boundary"]
    lines = [
        "# What each rule writes, per torch release",
        "",
        "Generated from each rule's `emits` (`release_table` in recompile_fix/findings/releases.py);",
        "tests/test_releases.py checks this file against it (`pytest tests/test_releases.py",
        "--update-golden` rewrites it). A fix is written only for a release marked `yes`: the",
        "Profile's torch, or in static mode the installed one; elsewhere the Finding has no fix and",
        "says why. `note`: suggested in a note, never written. A release not measured between two",
        "that were counts as `no`.",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    for rule in rules:
        for api in rule.emits:
            cells = ["yes" if api.runs_on(release) else "no" for release in RELEASES]
            lines.append(
                "| " + " | ".join([rule.id, f"`{api.name}`", api.use, api.since_text, *cells, api.checked]) + " |"
            )
    return "\n".join(lines) + "\n"
