"""Property suite: generated programs around a recompiling call (tests/fuzz_programs.py), each
with the Profile a profile run records on it, applied as `apply` applies them.

Fast lane (quick, >= 1,000 programs per run, RECOMPILE_FIX_FUZZ_EXAMPLES=N for more): the
rewrite of every program compiles, keeps the file's line endings, changes nothing but the edits'
spans and replaces only the compiled call's own arguments, is not rewritten again by a second
apply, and computes what the program computed (run on tests/fake_torch.py, which also checks
that each mark lands on the tensor the compiled function gets). A fix the tool cannot prove is
left out with one line, never a crash; in the plain positions it is made.

Slow lane (a sample, 2 by default, RECOMPILE_FIX_FUZZ_SLOW_EXAMPLES=N for more; real torch): profiled for real, applied, run again: same outputs, no more
compiles (torch's own compilation metrics, as the Profile records them).
"""

from __future__ import annotations

import ast
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from conftest import require_slow
from fake_torch import run_program
from fuzz_programs import POSITIONS, Program, profile_for, programs, report
from recompile_fix.profile.model import Profile
from recompile_fix.rules import ALL_RULES

EXAMPLES = int(os.environ.get("RECOMPILE_FIX_FUZZ_EXAMPLES", "1000"))
SHARDS = 4  # separate tests, so that pytest-xdist spreads them over the cores
STATS: collections.Counter = collections.Counter()

# CI draws the same programs every run (a red CI is a real regression, never a new draw);
# RECOMPILE_FIX_FUZZ_NEW_DRAWS=1 (the longer rounds of CONTRIBUTING.md) explores new ones.
NEW_DRAWS = os.environ.get("RECOMPILE_FIX_FUZZ_NEW_DRAWS") == "1"

_FAST = settings(
    max_examples=max(1, EXAMPLES // SHARDS),
    deadline=None,
    database=None,
    derandomize=not NEW_DRAWS,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def apply_to(program: Program, work: Path, profile_data: dict):
    from recompile_fix.pipeline.fix import run_apply

    (work / "program.py").write_bytes(program.data)
    (work / "profile.json").write_text(json.dumps(profile_data))
    profile = Profile.load(work / "profile.json")
    result = run_apply([str(work)], profile, ALL_RULES, root=str(work), jobs=1, use_cache=False)
    return profile, result


def _argument_spans(text: str) -> set[str]:
    """The source text of each argument of the compiled function's calls."""
    tree = ast.parse(text.lstrip("\ufeff"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "f"]
    values = [v for call in calls for v in [*call.args, *(k.value for k in call.keywords)]]
    return {ast.get_source_segment(text.lstrip("\ufeff"), v) for v in values}


def check_program(program: Program) -> str:
    """Apply the Profile to the program and check every property; returns what happened."""
    before = run_program(program.text)
    assert before["error"] is None, before["error"]
    with tempfile.TemporaryDirectory(prefix="recompile-fix-fuzz-") as tmp:
        work = Path(tmp)
        profile, result = apply_to(program, work, profile_for(program))
        for error in result.errors:
            assert "\n" not in error and "internal error" not in error and "Traceback" not in error, error
            assert " not applied: " in error, error  # the only error a valid program may give
        written = (work / "program.py").read_bytes()
        if written == program.data:
            assert not program.fix_expected or not any(f.fixable for f in result.findings), (
                "no fix made in a plain position",
                result.errors,
            )
            return "left alone" if result.errors else "nothing to fix"
        text = written.decode("utf-8")
        compile(text.lstrip("\ufeff"), "program.py", "exec", dont_inherit=True)
        # The file's own line endings, and the original outside the edits' spans.
        if program.ending == "\n":
            assert "\r" not in text
        elif program.ending == "\r":
            assert "\n" not in text
        else:
            assert text.count("\r") == text.count("\n") == text.count("\r\n")
        (rewrite,) = result.rewrites
        original = program.text
        spans = _argument_spans(original)
        pieces, cursor = [], 0
        for edit in sorted(rewrite.edits, key=lambda e: (e.start, e.end)):
            pieces.append(original[cursor : edit.start])
            pieces.append(edit.new_text)
            if edit.end > edit.start:  # a replacement: one of the compiled call's arguments, whole
                assert original[edit.start : edit.end] in spans, (original[edit.start : edit.end], spans)
            cursor = edit.end
        pieces.append(original[cursor:])
        assert "".join(pieces) == text
        # Same computation; every mark on the tensor the compiled function gets next.
        after = run_program(text)
        assert after["error"] is None, after["error"]
        assert after["results"] == before["results"]
        assert after["stdout"] == before["stdout"]
        assert after["misplaced_marks"] == 0
        # Nothing made on a path that never made it (an argument hoisted out of a branch), and
        # under `python -O` (no assert) the same as before too.
        assert after["made"] == before["made"], ("tensors made", before["made"], after["made"])
        if program.position == "assert":
            assert run_program(text, optimize=1) == run_program(program.text, optimize=1)
        # Idempotent: the same Profile again changes nothing (it remembers what it wrote) ...
        from recompile_fix.pipeline.fix import run_apply

        again = run_apply([str(work)], profile, ALL_RULES, root=str(work), jobs=1, use_cache=False)
        assert again.rewrites == [] and (work / "program.py").read_bytes() == written
        # ... and so does the Profile as it was (the file is no longer the one it saw).
        stale = Profile.load(work / "profile.json")
        again = run_apply([str(work)], stale, ALL_RULES, root=str(work), jobs=1, use_cache=False)
        assert again.rewrites == [] and (work / "program.py").read_bytes() == written
    return "fixed" + (" (some left out)" if result.errors else "")


def _shard(index: int):
    names = sorted(POSITIONS)[index::SHARDS]
    return programs().filter(lambda p: p.position in names)


@pytest.mark.fuzz
@pytest.mark.parametrize("shard", range(SHARDS))
def test_generated_programs(shard):
    seen: collections.Counter = collections.Counter()

    @_FAST
    @given(program=_shard(shard))
    def run(program):
        try:
            outcome = check_program(program)
        except AssertionError as exc:
            raise AssertionError(f"{program.describe()}\n{program.text}\n{exc}") from exc
        seen[(program.position, outcome)] += 1

    run()
    STATS.update(seen)
    report(seen, "programs", shard)
    assert sum(seen.values()) >= _FAST.max_examples * 0.9
    fixed = sum(n for (_, outcome), n in seen.items() if outcome.startswith("fixed"))
    assert fixed > sum(seen.values()) // 4, seen  # the suite is not passing by fixing nothing


def test_the_fast_lane_covers_every_position():
    """Every position of the generator is in some shard (the shards partition them)."""
    names = sorted(POSITIONS)
    assert sorted(n for i in range(SHARDS) for n in names[i::SHARDS]) == names


# -- the slow lane: real torch ------------------------------------------------------------------------
# Two by default: each is two profile runs with torch (its import and compiles), as costly as the
# thousand programs of the fast lane; the fast lane checks every rewrite's outputs on fake torch.
SLOW_EXAMPLES = int(os.environ.get("RECOMPILE_FIX_FUZZ_SLOW_EXAMPLES", "2"))


def _profile_run(work: Path, name: str) -> tuple[str, int]:
    """`recompile-fix profile` on a program: its stdout and its compiles (torch's metrics)."""
    done = subprocess.run(
        [sys.executable, "-m", "recompile_fix", "profile", "--backend", "eager", "-o", f"{name}.json", "--"]
        + ["python", "program.py"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    recorded = json.loads((work / f"{name}.json").read_text())
    return done.stdout, sum(len(frame["compiles"]) for frame in recorded["frames"])


@pytest.mark.slow
def test_a_sample_runs_the_same_with_torch(tmp_path):
    require_slow("the fuzz suite's torch lane")

    @settings(
        max_examples=SLOW_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(program=programs().filter(lambda p: p.fix_expected and not p.nodebugranges))
    def run(program):
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        (work / "program.py").write_bytes(program.data)
        out_before, compiles_before = _profile_run(work, "before")
        applied = subprocess.run(
            [sys.executable, "-m", "recompile_fix", "apply", ".", "--profile", "before.json"],
            cwd=work,
            capture_output=True,
            text=True,
        )
        assert applied.returncode == 0, (program.describe(), applied.stderr)
        assert (work / "program.py").read_bytes() != program.data, program.describe()
        out_after, compiles_after = _profile_run(work, "after")
        assert out_after == out_before, program.describe()
        assert compiles_after <= compiles_before, (program.describe(), compiles_before, compiles_after)
        shutil.rmtree(work)

    run()
