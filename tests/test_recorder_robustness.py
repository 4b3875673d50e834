"""The recorder survives what programs do to torch's bookkeeping: each program in
tests/programs/robust/ does one such thing, and `recompile-fix profile` must still give a Profile
with every compile torch made (torch's own records, counted by tests/programs/torch_metrics.py),
each with its arguments, and every graph break; what the recorder had to repair is said.

Before the event sources were doubled (phase 1 of issue 18, torch 2.13.0 and 2.14.1), the
recorder got 0 compiles for metrics_limit, metrics_limit_reset and other_tool_deque, g 0 of 2
after dynamo_reset, compiles without arguments after other_tool_callbacks, 1 graph break of 2
after logging_*, and no Profile at all after os_exit."""

import json

import pytest

from conftest import PROGRAMS, ROOT, run_python
from recompile_fix.profile.model import Profile

ROBUST = PROGRAMS / "robust"
pytestmark = [pytest.mark.slow, pytest.mark.torch_lane]  # each test profiles a torch program


# A single `profile` runs its program in a process of its own (no warm runner); `verify` and
# `fix` run it in the warm runner's forked child. Both paths are tested: these programs cold (the
# exit path, issue 18's program, a reset of Dynamo), the others warm; tests/test_warm.py checks
# that a warm run is the same run. torch's own count (the reference) runs warm.
COLD_PROGRAMS = {"os_exit.py", "metrics_limit.py", "dynamo_reset.py"}
_PROFILED: dict[str, tuple] = {}


def profiled(cli, tmp_path_factory, program: str):
    """`recompile-fix profile` of ROBUST/``program``: (its result, the Profile's path), once a
    session per worker."""
    if program not in _PROFILED:
        out = tmp_path_factory.mktemp("robust") / "profile.json"
        env = {"RECOMPILE_FIX_WARM": "0"} if program in COLD_PROGRAMS else None
        args = ("profile", "-o", str(out), "--backend", "eager", "--", "python", str(ROBUST / program))
        _PROFILED[program] = (cli(*args, check=0, env=env), out)
    return _PROFILED[program]


# program -> (what the recorder must say it repaired, or None; how the process ended)
PROGRAMS_AND_NOTES = {
    # The seven-line program of issue 18: set_compilation_metrics_limit swaps torch's deque.
    "metrics_limit.py": ("metrics deque was replaced by the program", "exited"),
    "metrics_limit_reset.py": ("metrics deque was replaced by the program", "exited"),
    "dynamo_reset.py": ("torch._dynamo.reset()", "exited"),
    "counters_clear.py": (None, "exited"),
    "logging_dictconfig.py": ("graph-break logger was disabled", "exited"),
    "logging_handlers_removed.py": ("graph-break log handler was removed", "exited"),
    "set_stance.py": (None, "exited"),
    "other_tool_callbacks.py": ("compile-start callbacks were cleared", "exited"),
    "other_tool_deque.py": ("another tool's ToolDeque", "exited"),
    "os_exit.py": (None, "ended without atexit"),
}


def torch_truth(script):
    """torch's own compiles per frame ("name:first line") and graph-break count for one run."""
    done = run_python(PROGRAMS / "torch_metrics.py", script, cwd=ROOT)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith("TORCH_"))
    return json.loads(lines["TORCH_METRICS"]), int(lines["TORCH_GRAPH_BREAKS"])


@pytest.mark.parametrize("program", sorted(PROGRAMS_AND_NOTES))
def test_profile_has_every_compile_torch_made(program, tmp_path_factory, cli):
    script = ROBUST / program
    result, out = profiled(cli, tmp_path_factory, program)
    profile = Profile.load(out)
    compiles, graph_breaks = torch_truth(script)

    assert compiles, "torch compiled nothing: the program no longer tests anything"
    assert {f"{f.name}:{f.first_line}": len(f.compiles) for f in profile.frames} == compiles
    assert sum(b.count for f in profile.frames for b in f.graph_breaks) == graph_breaks
    for frame in profile.frames:
        for compile_ in frame.compiles:
            assert compile_.call_site is not None, (frame.name, compile_.id)
            if not frame.name.startswith("torch_dynamo_resume_in_"):
                assert compile_.inputs.get("x", {}).get("type") == "Tensor", (frame.name, compile_.id)

    assert f"(torch {profile.torch_version}, recorded in-process" in result.stderr  # says how it recorded
    note, ended = PROGRAMS_AND_NOTES[program]
    (process,) = profile.processes
    assert process["exit"] == ended
    status = process["recorder"]
    if ended == "exited":
        assert status["complete"] is True, status
        assert status["recorded_compile_ids"] == status["torch_compile_ids"] == sum(compiles.values())
    if note is not None:
        assert note in result.stderr and any(note in e for e in status["events"]), result.stderr
    else:
        assert "recompile-fix: note:" not in result.stderr
    if ended != "exited":
        assert "ended without running atexit" in result.stderr
    assert "missing compiles" not in result.stderr


def test_ids_after_reset_are_a_new_generation(tmp_path_factory, cli):
    _, out = profiled(cli, tmp_path_factory, "dynamo_reset.py")
    profile = Profile.load(out)
    assert [c.id for c in profile.frame("f").compiles] == ["0/0", "0/1", "0/2", "g1:1/0", "g1:1/1"]
    assert [c.id for c in profile.frame("g").compiles] == ["g1:0/0", "g1:0/1"]
    # g's recompile is for its scalar, read from guard_failures after reset() cleared them.
    (reason,) = profile.frame("g").compiles[1].reasons
    assert (reason.kind, reason.source, reason.value) == ("scalar_value", "c", 2)
    assert profile.processes[0]["recorder"]["generations"] == 2


def test_the_metrics_context_source_alone_records_every_compile(tmp_path_factory, cli):
    """Another tool's deque is never replaced: every compile comes from MetricsContext's exit."""
    result, out = profiled(cli, tmp_path_factory, "other_tool_deque.py")
    assert "other tool saw ['0/0', '0/1', '0/2']" in result.stdout  # the other tool still sees them all
    status = Profile.load(out).processes[0]["recorder"]
    assert status["sources"] == {"metrics_context": 3}
