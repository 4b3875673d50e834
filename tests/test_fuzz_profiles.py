"""Corrupted Profiles: real recorded Profiles (the two-file project, every golden case, the proof
cases) mutated at random (a value of another type, a number off by one or far out, a string
made a path out of the project, a key or list item deleted, items swapped or duplicated, the
file cut short), then applied. Each must give one line and exit code 2, or the same edits as the
original Profile; never a traceback, never an edit the original did not make.

A mutation that describes another run as well as a damaged one (the last compile of a frame
deleted: a shorter run) may give fewer fixes; those are counted by operator and allowed only
for deletions. RECOMPILE_FIX_FUZZ_PROFILES=N runs more (default 400).
"""

from __future__ import annotations

import collections
import functools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PROGRAMS, TWO_FILES
from fuzz_programs import report
from golden_cases import GOLDEN
from recompile_fix.errors import UserError
from recompile_fix.pipeline.fix import run_apply
from recompile_fix.profile.model import Profile
from recompile_fix.rules import ALL_RULES

MUTATIONS = int(os.environ.get("RECOMPILE_FIX_FUZZ_PROFILES", "400"))
SHARDS = 2
STATS: collections.Counter = collections.Counter()


@dataclass
class Base:
    name: str
    files: dict[str, bytes]  # the project's files, as profiled
    profile: dict
    edits: dict[str, str]  # what apply writes from the Profile as recorded


def _project_of(directory: Path) -> dict[str, bytes]:
    files = {}
    for path in directory.glob("*.py"):
        if path.name == "program.out.py":
            continue
        files["program.py" if path.name == "program.in.py" else path.name] = path.read_bytes()
    return files


def _apply(files: dict[str, bytes], profile_text: str) -> dict[str, str]:
    """path -> text written, for a project with these files and this Profile (UserError raised)."""
    with tempfile.TemporaryDirectory(prefix="recompile-fix-fuzz-profile-") as tmp:
        work = Path(tmp)
        for name, data in files.items():
            (work / name).write_bytes(data)
        # What a path-kind mutation names (issue 32): made only where the Profile names it.
        if '"pipe.py"' in profile_text:
            os.mkfifo(work / "pipe.py")
        if '"zero.py"' in profile_text:
            os.symlink("/dev/zero", work / "zero.py")
        if '"out.py"' in profile_text:
            os.symlink(os.path.abspath(__file__), work / "out.py")  # a regular file out of the project
        (work / "profile.json").write_text(profile_text.replace(_ROOT_MARK, str(work)))
        profile = Profile.load(work / "profile.json")
        result = run_apply(
            [str(work)], profile, ALL_RULES, root=str(work), write=False, jobs=1, use_cache=False, unsafe_fixes=True
        )
        return {r.path: r.after for r in result.rewrites}


@functools.cache
def all_bases() -> list[Base]:
    directories = [TWO_FILES] + sorted(p for p in GOLDEN.glob("RF*/*") if (p / "profile.json").exists())
    directories += sorted(p for p in (PROGRAMS / "proof").iterdir() if (p / "profile.json").exists())
    bases = []
    for directory in directories:
        files = _project_of(directory)
        text = (directory / "profile.json").read_text()
        bases.append(Base(str(directory.relative_to(GOLDEN.parent)), files, json.loads(text), _apply(files, text)))
    return bases


def _paths(value, prefix=()):
    """Every node of a JSON value, as a path of keys and indices."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _get(value, path):
    for key in path:
        value = value[key]
    return value


OPERATORS = [
    "retype",
    "retype_none",
    "number_far",
    "number_near",
    "string",
    "delete",
    "swap",
    "duplicate",
    "truncate",
    "path",
]
# A file a Profile names, of each kind the audit of issue 32 found read (a device, /proc, a FIFO,
# a link to a device or out of the project, the project's own file by its absolute path). The
# path keeps the hash the Profile recorded for the file it replaces.
_ROOT_MARK = "@PROJECT_ROOT@"
PATH_KINDS = {
    "device": "/dev/zero",
    "proc": "/proc/self/environ",
    "fifo": "pipe.py",
    "link_to_device": "zero.py",
    "link_out": "out.py",
    "absolute_project_path": _ROOT_MARK + "/{}",
}


def _mutate(data, operator: str, path, draw) -> str | None:
    """The mutated Profile's text, or None when this operator does not apply at this node."""
    if operator == "truncate":
        text = json.dumps(data)
        return text[: draw(st.integers(0, len(text) - 1))]
    if not path:
        return None
    parent, key = _get(data, path[:-1]), path[-1]
    value = parent[key]
    if operator.startswith("path:"):
        if key != "file" or not isinstance(value, str) or os.path.isabs(value):
            return None
        named = PATH_KINDS[operator.removeprefix("path:")].format(value)
        parent[key] = named
        if isinstance(data.get("sources"), dict) and value in data["sources"]:
            data["sources"][named] = data["sources"][value]
        return json.dumps(data)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if operator == "retype":
        replacements = [str(value), True, [value], {"v": value}, float("nan"), 0.5, 1]
        replacements = [r for r in replacements if type(r) is not type(value)]
        parent[key] = draw(st.sampled_from(replacements))
    elif operator == "retype_none":
        parent[key] = None  # an optional field the recorder did not fill
    elif operator == "number_far":
        if not number:
            return None
        parent[key] = draw(st.sampled_from([-1, -5, 99, 10**9, 2**63]))
    elif operator == "number_near":
        if not number:
            return None
        parent[key] = draw(st.sampled_from([value + 1, value - 1, 0, 1, value * 2]))
    elif operator == "string":
        if not isinstance(value, str):
            return None
        parent[key] = draw(st.sampled_from(["", "x", "../outside.py", "/etc/passwd", value + "x", value.upper()]))
    elif operator == "delete":
        del parent[key]
    elif operator in ("swap", "duplicate"):
        if not isinstance(value, list) or len(value) < (2 if operator == "swap" else 1):
            return None
        i = draw(st.integers(0, len(value) - 1))
        if operator == "swap":
            j = draw(st.integers(0, len(value) - 1).filter(lambda j: j != i))
            value[i], value[j] = value[j], value[i]
        else:
            value.insert(i, json.loads(json.dumps(value[i])))
    return json.dumps(data)


def strict(operator: str, path) -> bool:
    """Must this mutation give an error or the original edits? A value of the wrong type, out of
    range, a path, a cut file: yes. A recorded input a little different, a field left empty, an
    item deleted, swapped or repeated: the Profile of another run as much as a damaged one (torch names only the first
    failing guard, so a size seen only in the inputs is evidence too): any proven edits."""
    if operator in ("delete", "swap", "duplicate", "retype_none"):
        return False
    if path and path[-1] == "entry":
        # A guard naming a cache entry the Profile lacks is what a run whose recorder missed a
        # compile leaves: the size link it gave is gone, so fewer marks, never other ones.
        return False
    if operator == "string" and "inputs" in path and path[-1] == "value":
        return False  # a recorded string setting, as a recorded number: another run's value
    return not (operator.startswith("number") and "inputs" in path)


def _outcome(base: Base, text: str) -> tuple[str, dict[str, str]]:
    try:
        edits = _apply(base.files, text)
    except UserError as exc:
        assert "\n" not in str(exc), str(exc)
        return "error", {}
    for after in edits.values():  # whatever the Profile says, what is written compiles
        compile(after.lstrip("\ufeff"), "fixed.py", "exec", dont_inherit=True)
    if edits == base.edits:
        return "same", edits
    if all(path in base.edits for path in edits) and all(
        set(after.splitlines()) <= set(base.edits[path].splitlines()) for path, after in edits.items()
    ):
        return "fewer", edits
    return "other", edits


def _applies(operator: str, value) -> bool:
    if operator.startswith("path:"):
        return isinstance(value, str) and not os.path.isabs(value)
    if operator in ("number_far", "number_near"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if operator == "string":
        return isinstance(value, str)
    if operator in ("swap", "duplicate"):
        return isinstance(value, list) and len(value) >= (2 if operator == "swap" else 1)
    return True


@st.composite
def mutations(draw, shard: int):
    base = draw(st.sampled_from(all_bases()[shard::SHARDS]))
    original = json.dumps(base.profile)
    data = json.loads(original)
    operator = draw(st.sampled_from(OPERATORS))
    if operator == "path":
        operator = f"path:{draw(st.sampled_from(sorted(PATH_KINDS)))}"
    paths = [
        p
        for p in _paths(data)
        if p and _applies(operator, _get(data, p)) and (not operator.startswith("path:") or p[-1] == "file")
    ]
    path = draw(st.sampled_from(paths)) if paths and operator != "truncate" else ()
    text = _mutate(data, operator, path, draw)
    if text is None or text == original:  # changed nothing (a value replaced by itself)
        operator, text = "truncate", original[: draw(st.integers(0, len(original) - 1))]
    return base, operator, path, text


@pytest.mark.fuzz
@pytest.mark.parametrize("shard", range(SHARDS))
def test_corrupted_profiles(shard):
    seen: collections.Counter = collections.Counter()

    @settings(
        max_examples=max(1, MUTATIONS // SHARDS),
        deadline=None,
        database=None,
        derandomize=os.environ.get("RECOMPILE_FIX_FUZZ_NEW_DRAWS") != "1",  # as test_fuzz_programs
        suppress_health_check=list(HealthCheck),
    )
    @given(mutation=mutations(shard))
    def run(mutation):
        base, operator, path, text = mutation
        try:
            outcome, edits = _outcome(base, text)
        except Exception as exc:  # a traceback: the worst outcome after a wrong edit
            raise AssertionError(f"{base.name}: {operator} at {path}: crashed: {exc!r}") from exc
        if strict(operator, path):
            assert outcome in ("error", "same"), f"{base.name}: {operator} at {path}: {outcome} edits: {edits}"
        if operator.startswith("path:"):
            assert outcome != "other", f"{base.name}: {operator} at {path}: other edits: {edits}"
        seen[(operator if strict(operator, path) else f"{operator} (another run)", outcome)] += 1

    run()
    STATS.update(seen)
    report(seen, "profiles", shard)
    assert sum(n for (_, o), n in seen.items() if o == "error") > 0


@pytest.mark.slow  # every base Profile applied: seconds, no torch
def test_the_bases_make_fixes():
    """The mutations start from Profiles that fix something (else "same" proves nothing)."""
    bases = all_bases()
    assert sum(1 for b in bases if b.edits) >= len(bases) * 2 // 3
