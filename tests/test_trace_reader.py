"""`recompile-fix profile --from-trace DIR`: a TORCH_TRACE directory written by plain PyTorch
reads into the same Profile as the in-process recorder's, and into the frames and compile ids
tlparse (PyTorch's own trace parser) reads from it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, examples_run, run_cli, seed
from recompile_fix.analysis.project import Project
from recompile_fix.errors import UserError
from recompile_fix.findings.plan import plan
from recompile_fix.profile.model import Profile, relative_to_root, sha256_file
from recompile_fix.profile.trace_reader import profile_from_trace, read_trace
from recompile_fix.rules import ALL_RULES
from tlparse_output import run_tlparse, tlparse_compiles


@pytest.fixture(scope="module")
def traced_examples():
    """The session's run of examples/ under the recorder, with TORCH_TRACE on (conftest's
    ``examples_run``): both read the same run. Its folder is shared: nothing here edits it."""
    work = examples_run()
    recorded = Profile.load(work / ".recompile-fix" / "profile.json")
    traced = profile_from_trace(work / "trace", root=str(work))
    return work, recorded, traced


def _findings(profile, root):
    project = Project(str(root), expected_hashes=profile.sources)
    return [(f.rule, f.file, f.params, f.safety.value) for f in plan(profile, project, ALL_RULES)]


def test_trace_yields_the_same_findings_as_the_in_process_profile(traced_examples):
    work, recorded, traced = traced_examples
    # Inherent differences, the block rules': a trace holds neither the stacks of blocks the
    # recorder lists at compile start (RF007) nor the backend the program ran (RF004's gate).
    found = [f for f in _findings(recorded, work) if f[0] not in ("RF004", "RF007")]
    assert [f for f in _findings(traced, work) if f[0] not in ("RF004", "RF007")] == found
    rules = {rule for rule, *_ in found}
    assert "RF001" in rules and len(found) >= 5
    fixed = {file for rule, file, params, safety in found if rule == "RF001" and safety == "safe"}
    assert {"examples/growing_shape.py", "examples/ragged_batch.py"} <= fixed
    assert traced.sources == recorded.sources  # hashed from the same checkout


@pytest.mark.torch_lane
def test_trace_compiles_match_the_recorder_compile_by_compile(traced_examples):
    _, recorded, traced = traced_examples

    def by_id(profile):
        return {c.id: (f, c) for f in profile.frames for c in f.compiles}

    ours, theirs = by_id(traced), by_id(recorded)
    assert ours.keys() == theirs.keys() and len(ours) >= 30
    for compile_id, (frame, compile_) in ours.items():
        their_frame, their = theirs[compile_id]
        assert frame.key == their_frame.key
        assert [
            (r.kind, r.source, r.dim, r.expected, r.actual, r.value, r.entry, r.first_use) for r in compile_.reasons
        ] == [(r.kind, r.source, r.dim, r.expected, r.actual, r.value, r.entry, r.first_use) for r in their.reasons]
        assert (compile_.limit_hit, compile_.fail_type, compile_.is_recompile) == (
            their.limit_hit,
            their.fail_type,
            their.is_recompile,
        )
        assert compile_.seconds["dynamo"] == pytest.approx(their.seconds["dynamo"])
        # The trace describes the tensors a graph used; the recorder every argument (a frame that
        # breaks before touching `inp` has it only in the recorder).
        # The recorder also knows each tensor's device, which a trace does not say.
        assert all(
            {k: (their.inputs.get(name) or {}).get(k) for k in value} == value
            for name, value in compile_.inputs.items()
        ), compile_id
        if compile_.limit_hit:
            # Torch logs no dynamo_start for a compile it refuses at the recompile limit.
            assert compile_.stack == [] and their.stack
            continue
        # The call site: same file, line and call expression. Inherent difference: torch's
        # dynamo_start drops the two innermost frames above the compiled one, so a comprehension
        # calling it (`[fn(x) for x in xs]`) shows as its enclosing function, on the same line.
        # A line with nested calls (`predictions.append(compiled(x))`): the trace's position is
        # the line's outer call, the recorder's the compiled call inside it; the rules resolve
        # either to the call that takes the recorded arguments (analysis/call_match.py).
        site, their_site = compile_.call_site, their.call_site
        assert (site.file, site.line) == (their_site.file, their_site.line), compile_id
        if site.col is not None and their_site.col is not None:
            assert site.col <= their_site.col and their_site.end_col <= site.end_col, compile_id
        assert site.function == their_site.function or their_site.function == "<listcomp>"
    for frame in traced.frames:
        their_frame = next(f for f in recorded.frames if f.key == frame.key)
        assert frame.graph_breaks == their_frame.graph_breaks


def test_frames_and_compile_ids_agree_with_tlparse(traced_examples, tmp_path):
    work, _, traced = traced_examples
    (log,) = (work / "trace").iterdir()
    run_tlparse(log, tmp_path / "tl")
    # tlparse names files as the trace does (absolute); spelled as a Profile spells them (the
    # program's relative to the root, a library's by import path: /site-packages/torch/optim/adam.py).
    theirs = {
        cid: frame and (relative_to_root(frame[0], str(work)), *frame[1:])
        for cid, frame in tlparse_compiles(tmp_path / "tl").items()
    }
    assert any(frame and frame[0].startswith("/site-packages/torch/") for frame in theirs.values())
    ours = {}
    for frame in traced.frames:
        for compile_ in frame.compiles:
            ours[compile_.id] = None if compile_.limit_hit else (frame.file, frame.first_line, frame.name)
    assert ours == theirs
    assert list(theirs.values()).count(None) == 1  # the limit hit: no frame in its metrics, in either


def test_profile_from_trace_cli(traced_examples, tmp_path):
    work, _, traced = traced_examples
    out = tmp_path / "traced.json"
    result = run_cli("profile", "--from-trace", "trace", "-o", str(out), cwd=work, check=0)
    assert f"{len(traced.frames)} frames, {traced.total_compiles} compiles" in result.stderr
    loaded = Profile.load(out)
    assert loaded.command == ["--from-trace", "trace"] and loaded.exit_code is None
    report = run_cli("report", str(out), cwd=work, check=0).stdout
    assert "tensor size changed: `x` dim 0" in report and "per rank" not in report


def test_from_trace_errors(tmp_path):
    missing = run_cli("profile", "--from-trace", str(tmp_path / "nope"), cwd=tmp_path, check=2)
    assert missing.stderr.count("\n") == 1 and "no such TORCH_TRACE directory" in missing.stderr
    empty = run_cli("profile", "--from-trace", str(tmp_path), cwd=tmp_path, check=2)
    assert "no TORCH_TRACE logs here" in empty.stderr
    both = run_cli("profile", "--from-trace", str(tmp_path), "--", "python", "x.py", cwd=tmp_path, check=2)
    assert "give no command" in both.stderr


@pytest.mark.slow
def test_module_level_call_site_is_lost_by_torch_unless_a_symbol_stack_has_it(tmp_path):
    """The documented limit: `fn(torch.ones(3))` at module level. Torch's dynamo_start drops
    the calling <module> frame; the recompile (automatic dynamic) logs a create_symbol with the
    full stack, the first compile nothing: it gets no stack rather than a guessed one."""
    script = seed("shape_change.py")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "TORCH_TRACE": str(tmp_path / "t")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    frame = profile_from_trace(tmp_path / "t", root=str(ROOT)).frame("fn")
    first, second = frame.compiles
    lines = script.read_text().splitlines()
    assert first.stack == []
    assert lines[second.call_site.line - 1] == "fn(torch.ones(4))"


# -- the format, on hand-written traces ---------------------------------------------------------


def _record(meta, payload=None, *, pid=4242):
    text = f"V1130 09:18:35.716000 {pid} torch/_dynamo/convert_frame.py:303] {json.dumps(meta)}\n"
    if payload is not None:
        text += "".join(f"\t{line}\n" for line in payload.split("\n"))
    return text


TRAIN = """import torch


@torch.compile
def step(x):
    return x * 2


def loop(batches):
    for b in batches:
        out = step(b)
"""


def _write_rank(trace: Path, rank: int, compiles: int, torch_dir="/opt/env/site-packages/torch") -> None:
    user = "/remote/job/proj/train.py"  # the path on the machine that ran it
    lines = [
        _record({"str": [f"{torch_dir}/_dynamo/convert_frame.py", 0]}),
        _record({"str": [user, 1]}),
        _record({"str": [f"{torch_dir}/_dynamo/eval_frame.py", 2]}),
        "this line is not a record\n",
        _record({"future_event_kind": {"x": 1}, "has_payload": "ab"}, "payload of\nan event we do not know"),
        'V1130 09:18:35.716000 4242 torch/x.py:1] {"broken json\n',
    ]
    for n in range(compiles):
        ids = {"frame_id": 0, "frame_compile_id": n, "attempt": 0, "rank": rank}
        # torch drops the caller (`loop`, line 11) and its own compile wrapper
        lines.append(
            _record(
                {
                    "dynamo_start": {
                        "stack": [
                            {"line": 20, "name": "<module>", "filename": 1, "loc": "loop(data)"},
                            {"line": 5, "name": "step", "filename": 1},
                        ]
                    },
                    **ids,
                }
            )
        )
        if n:
            lines.append(
                _record(
                    {"artifact": {"name": "recompile_reasons", "encoding": "json"}, **ids, "has_payload": "x"},
                    "0/0: tensor 'x' size mismatch at index 0. expected 16, actual 3",
                )
            )
            # the full stack of a dynamic compile has the call site
            lines.append(
                _record(
                    {
                        "create_symbol": {
                            "symbol": "s0",
                            "val": "3",
                            "source": "L['x'].size()[0]",
                            "stack": [
                                {"line": 20, "name": "<module>", "filename": 1, "loc": "loop(data)"},
                                {"line": 11, "name": "loop", "filename": 1, "loc": "out = step(b)"},
                                {
                                    "line": 1166,
                                    "name": "compile_wrapper",
                                    "filename": 2,
                                    "loc": "result = fn(*args, **kwargs)",
                                },
                                {"line": 2628, "name": "__call__", "filename": 0, "loc": "result = ..."},
                            ],
                        },
                        **ids,
                    }
                )
            )
        lines.append(
            _record(
                {
                    "describe_tensor": {
                        "id": 0,
                        "ndim": 1,
                        "dtype": "torch.float32",
                        "size": [16 if n == 0 else 3],
                        "stride": [1],
                        "describer_id": n,
                    },
                    **ids,
                }
            )
        )
        lines.append(_record({"describe_source": {"describer_id": n, "id": 0, "source": "L['x']"}, **ids}))
        lines.append(
            _record(
                {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, **ids, "has_payload": "y"},
                f"Graph break in user code at {user}:6\nGraph Break Reason: Call to print\n\n  Explanation: print",
            )
        )
        lines.append(
            _record(
                {
                    "compilation_metrics": {
                        "compile_id": f"0/{n}",
                        "co_name": "step",
                        "co_filename": user,
                        "co_firstlineno": 4,
                        "dynamo_cumulative_compile_time_us": 250000,
                        "fail_type": None,
                        "fail_reason": None,
                        "pytorch_version": "2.13.0+cpu",
                        "recompile_reason": None,
                    },
                    **ids,
                }
            )
        )
    (trace / f"dedicated_log_torch_trace_rank_{rank}_abc{rank}.log").write_text("".join(lines))


def test_hand_written_multi_rank_trace(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    trace = tmp_path / "trace"
    trace.mkdir()
    _write_rank(trace, 0, compiles=1)
    _write_rank(trace, 1, compiles=2)
    assert [r["rank"] for r in read_trace(trace, root=str(tmp_path))] == [0, 1]
    profile = profile_from_trace(trace, root=str(tmp_path))
    (frame,) = profile.frames
    # The remote path is matched to this checkout; unknown events and bad lines are skipped.
    assert frame.key == ("train.py", 4, "step")
    assert profile.sources == {"train.py": sha256_file(tmp_path / "train.py")}
    assert [(c.rank, c.id) for c in frame.compiles] == [(0, "0/0"), (1, "0/0"), (1, "0/1")]
    assert sorted(p["rank"] for p in profile.processes) == [0, 1]
    assert profile.torch_version == "2.13.0+cpu"
    rank0, rank1_first, rank1_second = frame.compiles
    (reason,) = rank1_second.reasons
    assert (reason.kind, reason.source, reason.dim, reason.expected, reason.actual) == ("size_mismatch", "x", 0, 16, 3)
    # The first compile's caller was dropped by torch and nothing else names it: no stack.
    assert rank0.stack == [] and rank1_first.stack == []
    site = rank1_second.call_site
    assert (site.file, site.line, site.col, site.end_col, site.function) == ("train.py", 11, 14, 21, "loop")
    assert rank1_second.inputs == {"x": {"type": "Tensor", "shape": [3], "stride": [1], "dtype": "float32"}}
    assert rank1_second.seconds["dynamo"] == 0.25
    ((graph_break),) = frame.graph_breaks
    assert (graph_break.location.file, graph_break.location.line, graph_break.count) == ("train.py", 6, 3)
    assert graph_break.reason == "Call to print Explanation: print"
    findings = plan(profile, Project(str(tmp_path), expected_hashes=profile.sources), ALL_RULES)
    (rf001,) = [f for f in findings if f.rule == "RF001"]
    (mark,) = rf001.params["marks"]
    assert (rf001.location.line, mark["label"], mark["dims"]) == (11, "b", [0])  # step(b)


def test_recompile_reasons_payload_list_and_resume_pieces(tmp_path):
    (tmp_path / "m.py").write_text(
        "def gn(x, c):\n    y = x + 1\n    print(y)\n    return y * c\n\n\ndef main():\n    gn(1, 2)\n"
    )
    path = "/elsewhere/checkout/m.py"  # run on another machine
    reasons = ["1/1: c == 2", "1/0: c == 1"]
    lines = [_record({"str": [path, 0]})]
    for n in range(3):
        ids = {"frame_id": 1, "frame_compile_id": n, "attempt": 0}
        # a resume function: torch dropped `gn` (at the break, line 3) and its compile wrapper
        lines.append(
            _record(
                {
                    "dynamo_start": {
                        "stack": [
                            {"line": 8, "name": "main", "filename": 0, "loc": "gn(1, 2)"},
                            {"line": 3, "name": "torch_dynamo_resume_in_gn_at_3", "filename": 0},
                        ]
                    },
                    **ids,
                }
            )
        )
        if n:
            lines.append(
                _record(
                    {"artifact": {"name": "recompile_reasons", "encoding": "json"}, **ids, "has_payload": "z"},
                    json.dumps(reasons[-n:], indent=0) if n > 1 else reasons[-1],
                )
            )
        lines.append(
            _record(
                {"dynamo_cpp_guards_str": {}, **ids, "has_payload": "w"},
                f"TREE_GUARD_MANAGER:\n| | +- EQUALS_MATCH: L['c'] == {n + 1}   # return y * c  # m.py:4 in gn",
            )
        )
        lines.append(
            _record(
                {
                    "compilation_metrics": {
                        "compile_id": f"1/{n}",
                        "co_name": "torch_dynamo_resume_in_gn_at_3",
                        "co_filename": path,
                        "co_firstlineno": 3,
                        "entire_frame_compile_time_s": 0.1,
                    },
                    **ids,
                }
            )
        )
    (tmp_path / "dedicated_log_torch_trace_x.log").write_text("".join(lines))
    (frame,) = profile_from_trace(tmp_path, root=str(tmp_path)).frames
    assert [len(c.reasons) for c in frame.compiles] == [0, 1, 2]
    assert [(r.kind, r.source, r.value) for r in frame.compiles[2].reasons] == [
        ("scalar_value", "c", 2),
        ("scalar_value", "c", 1),
    ]
    assert [c.inputs["c"] for c in frame.compiles] == [{"type": "int", "value": v} for v in (1, 2, 3)]
    assert all(c.rank is None for c in frame.compiles)
    # The rebuilt caller is the original function at the break line, as the recorder sees it.
    assert [(s.file, s.line, s.function) for s in frame.compiles[0].stack] == [("m.py", 8, "main"), ("m.py", 3, "gn")]
    assert frame.compiles[0].stack[0].col == 4  # `gn(1, 2)`, found in this checkout's m.py


def test_read_trace_errors(tmp_path):
    with pytest.raises(UserError, match="no TORCH_TRACE logs"):
        read_trace(tmp_path)
