"""The recorder's bookkeeping, without running torch: its cross-check against the compile ids
torch handed out, the warning when it recorded fewer, the journal a process without atexit
leaves, and compile-id generations after torch._dynamo.reset()."""

import json
import sys
import types

from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.recorder import part_files, recording
from recompile_fix.profile.run import _read_parts, recorder_warnings, recording_summary


def _metrics(compile_id, start, name="f", line=3):
    return types.SimpleNamespace(
        compile_id=compile_id, start_time_us=start, co_name=name, co_filename="/p/m.py", co_firstlineno=line
    )


def _fake_torch(monkeypatch, counter: dict):
    """The two torch modules the cross-check reads: FRAME_COMPILE_COUNTER and the metrics deque."""
    convert_frame = types.ModuleType("torch._dynamo.convert_frame")
    convert_frame.FRAME_COMPILE_COUNTER = counter
    utils = types.ModuleType("torch._dynamo.utils")
    utils.guard_failures = {}
    monkeypatch.setitem(sys.modules, "torch._dynamo.convert_frame", convert_frame)
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", utils)
    monkeypatch.setattr(recording, "compiled_frame_inputs", lambda: {})
    monkeypatch.setattr(recording.Recorder, "ensure_hooks", lambda self: None)  # no real loggers touched
    return convert_frame, utils


def test_fewer_compiles_than_torch_handed_out_is_incomplete(monkeypatch):
    counter = {0: 2}
    _fake_torch(monkeypatch, counter)
    rec = recording.Recorder()
    rec.on_metrics(_metrics("0/0", 1), source="deque")
    counter[0] = 3  # two more compiles torch made; the recorder saw one of them
    rec.on_metrics(_metrics("0/1", 2), source="metrics_context")
    rec.on_metrics(_metrics("0/1", 2), source="deque")  # the same record from the other source
    status = rec.reconcile()
    assert (status["torch_compile_ids"], status["recorded_compile_ids"], status["complete"]) == (3, 2, False)
    assert status["sources"] == {"deque": 1, "metrics_context": 1}
    (warning,) = recorder_warnings([{"pid": 7, "recorder": status, "compiles": []}])
    assert "handed out 3 compile ids, the recorder saw 2" in warning and "--from-trace" in warning


def test_compile_ids_given_out_again_start_a_generation(monkeypatch):
    counter = {0: 1}
    _fake_torch(monkeypatch, counter)
    rec = recording.Recorder()
    rec.on_metrics(_metrics("0/0", 1), source="deque")
    counter[0] = 2
    rec.on_metrics(_metrics("0/1", 2), source="deque")
    counter.clear()  # torch._dynamo.reset(), through a path our wrapper did not see
    counter[0] = 1
    rec.on_metrics(_metrics("0/0", 3, name="g", line=9), source="deque")
    assert [c["generation"] for c in rec.compiles] == [0, 0, 1]
    status = rec.reconcile()
    assert (status["torch_compile_ids"], status["recorded_compile_ids"], status["complete"]) == (3, 3, True)
    assert status["generations"] == 2 and "restarted" in status["events"][0]
    profile = build_profile(
        [{"pid": 1, "compiles": rec.compiles, "graph_breaks": [], "recorder": status}], command=["x"], root="/p"
    )
    assert {f.name: [c.id for c in f.compiles] for f in profile.frames} == {"f": ["0/0", "0/1"], "g": ["g1:0/0"]}
    assert not profile.frame("g").compiles[0].is_recompile


def test_a_process_without_atexit_leaves_its_journal(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    compile_ = {"compile_id": "0/0", "frame": {"file": "/p/m.py", "line": 3, "name": "f"}, "stack": []}
    lines = [
        {"process": {"pid": 11, "rank": None, "torch_version": "2.14.1", "argv": ["m.py"]}},
        {"compile": compile_},
        {"compile": {**compile_, "compile_id": "0/1"}},
        {"graph_break": {"compile_id": "0/1", "file": "/p/m.py", "line": 5, "reason": "x"}},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (parts / "part-11.jsonl").write_text(text + '{"compile": {"compile_id": "0/2", "fr')  # killed mid-line
    # A process that reached atexit: its final record wins over its journal.
    (parts / "part-12.jsonl").write_text(text.replace('"pid": 11', '"pid": 12'))
    (parts / "part-12.json").write_text(json.dumps({"pid": 12, "compiles": [], "graph_breaks": [], "exit": {}}))
    records = {r["pid"]: r for r in _read_parts(parts)}
    assert len(records[11]["compiles"]) == 2 and len(records[11]["graph_breaks"]) == 1
    assert records[11]["exit"]["status"] == "ended without atexit" and records[12]["compiles"] == []
    assert any("ended without running atexit" in w for w in recorder_warnings(list(records.values())))
    profile = build_profile([records[11]], command=["python", "m.py"], root="/p")
    assert [c.id for c in profile.frame("f").compiles] == ["0/0", "0/1"]
    assert "torch 2.14.1, recorded in-process (read back from the journal" in recording_summary(profile)


def test_the_journal_is_written_as_compiles_are_recorded(tmp_path, monkeypatch):
    _fake_torch(monkeypatch, {0: 1})
    monkeypatch.setenv(part_files.PARTS_DIR_ENV, str(tmp_path))
    rec = recording.Recorder()
    rec.torch_version = "2.15.0"
    rec.on_metrics(_metrics("0/0", 1), source="metrics_context")
    (journal,) = tmp_path.glob("part-*.jsonl")
    first, second = (json.loads(line) for line in journal.read_text().splitlines())
    assert first["process"]["torch_version"] == "2.15.0" and second["compile"]["compile_id"] == "0/0"
    rec.write({"status": "exited"})  # atexit: the final record replaces the journal
    assert not list(tmp_path.glob("part-*.jsonl"))
    (final,) = tmp_path.glob("part-*.json")
    assert json.loads(final.read_text())["recorder"]["complete"] is True


def test_what_a_missing_internal_costs_is_said():
    status = {"torch_version": "2.99.0", "features": {"guard_failures": False, "compile_start_callback": True}}
    (note,) = recorder_warnings([{"pid": 3, "recorder": status, "compiles": []}])
    assert note == (
        "note: pid 3: torch 2.99.0 has no guard_failures: each recompile keeps only the reason its metrics record names"
    )
