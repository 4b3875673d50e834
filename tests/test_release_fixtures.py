"""Runs of other torch releases, parsed without installing them (tests/fixtures/torch-<version>/,
see the README there): for each seed program and example, the recorder's raw records and the
TORCH_TRACE directory of a run on that release give Profiles whose frames and compiles are what
that release reported, with every reason typed, the recompile-limit hit counted, graph breaks
with their reasons, and the TORCH_LOGS=recompiles text typed too."""

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from recompile_fix.analysis.project import Project
from recompile_fix.findings.plan import plan
from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.model import Profile, sha256_file, torch_release
from recompile_fix.profile.reasons import parse_reasons
from recompile_fix.profile.trace_reader import profile_from_trace
from recompile_fix.rules import ALL_RULES

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUN_TREE = "/recorded/run-tree"  # where the programs ran (paths in the fixtures say so)
RELEASES = sorted(p.name.split("-", 1)[1] for p in FIXTURES.glob("torch-*") if (p / "expected.json").exists())
PROGRAMS = [
    (version, program, expected)
    for version in RELEASES
    for program, expected in json.loads((FIXTURES / f"torch-{version}" / "expected.json").read_text()).items()
]


def _id(param):
    return f"{param[0]}-{param[1]}" if isinstance(param, tuple) else None


def frame_key(frame) -> str:
    """``examples/x.py:12:add_one``; torch's and the standard library's files as ``<site-packages>/
    torch/...`` and ``<stdlib>/typing.py``, as the fixtures' truth names them."""
    file = re.sub(r"^.*/site-packages/", "<site-packages>/", frame.file)
    file = re.sub(r"^(?:/recorded/python/lib/python3\.\d+|/stdlib)/", "<stdlib>/", file)
    return f"{file}:{frame.first_line}:{frame.name}"


def recorded_profile(version: str, program: str) -> Profile:
    raw = FIXTURES / f"torch-{version}" / program / "raw"
    records = [json.loads(p.read_text()) for p in sorted(raw.glob("part-*.json"))]
    return build_profile(records, command=["python", program], root=RUN_TREE)


def traced_profile(version: str, program: str, tmp: Path) -> Profile:
    trace = tmp / "trace"
    trace.mkdir()
    for log in sorted((FIXTURES / f"torch-{version}" / program / "trace").glob("*.log.gz")):
        with gzip.open(log, "rt", encoding="utf-8") as fh:
            (trace / log.name[: -len(".gz")]).write_text(fh.read())
    return profile_from_trace(trace, root=RUN_TREE)


def check(profile: Profile, version: str, compiles: dict, limit_hits: int, graph_breaks: int | None) -> None:
    if profile.torch_version is not None:
        assert profile.torch_version.startswith(version)
    assert {frame_key(f): len(f.compiles) for f in profile.frames} == compiles
    assert sum(f.limit_hits for f in profile.frames) == limit_hits
    others = [r.text for f in profile.frames for r in f.reasons() if r.kind == "other"]
    assert others == []
    for frame in profile.frames:
        for compile_ in frame.compiles:
            if compile_.is_recompile:  # torch says why it compiled again: every reason typed
                assert compile_.reasons, (frame.name, compile_.id)
        for graph_break in frame.graph_breaks:
            assert graph_break.reason, (frame.name, graph_break)
    if graph_breaks is not None:
        assert sum(b.count for f in profile.frames for b in f.graph_breaks) == graph_breaks
    limit = [r for f in profile.frames for r in f.reasons() if r.kind == "limit_hit"]
    # 2.6 has no recompile_limit: its limit is cache_size_limit (the config to raise, if any).
    want = "cache_size_limit" if torch_release(version) < (2, 7) else "recompile_limit"
    assert all(r.source == want for r in limit), [r.source for r in limit]


def test_fixtures_of_four_releases_besides_2_13():
    assert len(set(RELEASES) - {"2.13.0"}) >= 4, RELEASES


@pytest.mark.parametrize("version, program, expected", PROGRAMS, ids=[f"{v}-{p}" for v, p, _ in PROGRAMS])
def test_recorder_records_of_a_release(version, program, expected):
    profile = recorded_profile(version, program)
    assert profile.torch_version.startswith(version)
    check(profile, version, expected["compiles"], expected["limit_hits"], expected["graph_breaks"])
    for process in profile.processes:
        status = process["recorder"]
        assert status["complete"] is True and status["path"] == "in-process", status
    if program.endswith("float_constants"):
        # Every compile has the scalar's value: 2.6 calls the compile-start callback with no
        # arguments (the recorder asks torch's CompileContext for the id).
        (frame,) = [f for f in profile.frames if f.name == "scale_shift"]
        assert all(c.inputs.get("alpha", {}).get("type") == "float" for c in frame.compiles)


@pytest.mark.parametrize(
    "version, program, expected",
    [p for p in PROGRAMS if not p[1].endswith("run_all")],
    ids=[f"{v}-{p}" for v, p, _ in PROGRAMS if not p.endswith("run_all")],
)
def test_trace_of_a_release(version, program, expected, tmp_path):
    profile = traced_profile(version, program, tmp_path)
    # torch < 2.10 writes its version nowhere in the trace (the reader then asks the torch the
    # trace names, not installed here): the Profile says it does not know.
    assert (profile.torch_version is not None) == (torch_release(version) >= (2, 10)), profile.torch_version
    check(profile, version, expected["trace_compiles"], expected["trace_limit_hits"], expected["graph_breaks"])
    if program.endswith("float_constant"):
        # torch 2.8 writes EQUALS_MATCH guards without a comment: the value is read all the same.
        (frame,) = [f for f in profile.frames if f.name == "fn"]
        assert [c.inputs["c"]["value"] for c in frame.compiles] == [0.5, 1.5, 2.5]


@pytest.mark.parametrize(
    "version, program, expected",
    [p for p in PROGRAMS if not p[1].endswith("run_all")],
    ids=[f"{v}-{p}" for v, p, _ in PROGRAMS if not p.endswith("run_all")],
)
def test_recompiles_log_of_a_release(version, program, expected):
    """TORCH_LOGS=recompiles: every guard failure it lists parses to a typed reason, one
    "Recompiling function" block per compile after a frame's first, and the limit warning names
    the config the limit-hit Reason names."""
    path = FIXTURES / f"torch-{version}" / program / "recompiles.log.gz"
    log = ""  # torch logged nothing: nothing recompiled
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            log = fh.read()
    guards = re.findall(r"\[__recompiles\]\s+- (!?[\d/]+: .+)$", log, re.M)  # one entry's failure a line
    assert all(r.kind != "other" for g in guards for r in parse_reasons(g)), guards
    blocks = len(re.findall(r"Recompiling function", log))  # the attempt at the limit too
    assert blocks == sum(expected["compiles"].values()) - len(expected["compiles"])
    limit = re.search(r"hit config\.(\w+) \((\d+)\)", log)
    assert (limit is not None) == (expected["limit_hits"] > 0)
    if limit:
        want = "cache_size_limit" if torch_release(version) < (2, 7) else "recompile_limit"
        assert limit.group(1) == want


BASELINE = "2.13.0"
# What each release's Profile of examples/run_all.py changes in 2.13.0's Findings, and why:
# rule -> the safety its Finding has there (None: no Finding).
DIFFERENCES = {
    # No torch.compiler.nested_compile_region before 2.8: the Finding says so and has no fix.
    # (RF005's graph break in examples/large_tail.py, placed from a first use only 2.13's guard
    # text gives, is left out on every release: RF002's 0-d tensor makes it moot.)
    "2.6.0": {"RF004": "none"},
}


def _findings(profile: Profile, tmp: Path) -> dict[tuple, str]:
    """(rule, file, line) -> safety of every Finding, planned against the examples as they ran
    (the repository's examples/, which are the programs the fixtures ran)."""
    shutil.copytree(ROOT / "examples", tmp / "examples")
    profile.sources = {f"examples/{p.name}": sha256_file(p) for p in sorted((tmp / "examples").glob("*.py"))}
    project = Project(str(tmp), expected_hashes=profile.sources)
    return {(f.rule, f.file, f.location.line): f.safety.value for f in plan(profile, project, ALL_RULES)}


@pytest.mark.parametrize("version", [v for v in RELEASES if v != BASELINE])
def test_run_all_gives_the_fixes_of_2_13(version, tmp_path):
    """The examples' Findings on each release are 2.13.0's, but for what DIFFERENCES says."""
    baseline = _findings(recorded_profile(BASELINE, "examples/run_all"), tmp_path / "base")
    found = _findings(recorded_profile(version, "examples/run_all"), tmp_path / version)
    assert len(baseline) >= 7
    changed = {key[0]: found.get(key) for key in baseline.keys() | found.keys() if baseline.get(key) != found.get(key)}
    assert changed == DIFFERENCES.get(version, {}), (baseline, found)


def test_trace_after_reset_numbers_generations_as_the_recorder_does(tmp_path):
    """tests/programs/robust/dynamo_reset.py on 2.14.1: torch._dynamo.reset() numbers compile ids
    from 0/0 again; the trace reader starts a generation where a compile id starts twice."""
    profile = traced_profile("2.14.1", "robust/dynamo_reset", tmp_path)
    assert {f.name: [c.id for c in f.compiles] for f in profile.frames} == {
        "f": ["0/0", "0/1", "0/2", "g1:1/0", "g1:1/1"],
        "g": ["g1:0/0", "g1:0/1"],
    }
    (reason,) = profile.frame("g").compiles[1].reasons
    assert (reason.kind, reason.source, reason.value) == ("scalar_value", "c", 2)
