"""Every example of PyTorch's recompilation guide (../shared/seeds/000_*.txt), run as a script under
`recompile-fix profile`: compile counts equal torch's own metrics, every reason is typed, and
each compile's call site is the line that called the compiled code."""

import json
import re

import pytest
import torch

from conftest import PROGRAMS, ROOT, run_python, seed
from recompile_fix.profile.model import Profile

pytestmark = [pytest.mark.slow, pytest.mark.torch_lane]  # every test here runs a torch program


# script -> {frame name: (reason kinds that must appear, regex the call-site line must match)}
EXPECTED = {
    "shape_change.py": {"fn": ({"size_mismatch"}, r"^fn\(torch\.ones\([34]\)\)$")},
    "dynamic_true.py": {"gn": (set(), r"^gn\(torch\.ones\(3\)\)$")},
    "float_constant.py": {"fn": ({"scalar_value"}, r"^fn\(torch\.ones\(i\), 0\.5 \+ i\)$")},
    "lr_scheduler.py": {
        "gn": (set(), r"^gn\(torch\.ones\(3, 3\)\)$"),
        "step": ({"optimizer_param_group"}, r"^opt\.step\(\)$"),
    },
    "limit_hit.py": {"fn": ({"size_mismatch", "limit_hit"}, r"^fn\(torch\.ones\(i\)\)$")},
    "cache_size_limit.py": {"gn": ({"size_mismatch"}, r"^gn\(torch\.ones\(i\)\)$")},
    "graph_break.py": {
        "fn": ({"scalar_value"}, r"^fn\(torch\.ones\(3\), i\)$"),
        "gn": (set(), r"^gn\(torch\.ones\(3\), i\)$"),
        "torch_dynamo_resume_in_gn_at_21": ({"scalar_value"}, r"^torch\._dynamo\.graph_break\(\)$"),
    },
}


def torch_metrics(script):
    out = run_python(PROGRAMS / "torch_metrics.py", script, cwd=ROOT)
    line = next(l for l in out.stdout.splitlines() if l.startswith("TORCH_METRICS "))
    return json.loads(line.split(" ", 1)[1])


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_seed_profile_matches_torch_metrics(script, tmp_path, cli):
    path = seed(script)
    out = tmp_path / "profile.json"
    cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(path), check=0)
    profile = Profile.load(out)

    recorded = {f"{f.name}:{f.first_line}": len(f.compiles) for f in profile.frames}
    assert recorded == torch_metrics(path)

    lines = path.read_text().splitlines()
    for frame in profile.frames:
        for reason in frame.reasons():
            assert reason.kind != "other", reason.text
    for name, (kinds, call_line) in EXPECTED[script].items():
        frame = profile.frame(name)
        assert frame is not None, f"no frame {name} in {sorted(recorded)}"
        assert kinds <= {r.kind for r in frame.reasons()}
        for compile_ in frame.compiles:
            site = compile_.call_site
            assert site.file == str(path.relative_to(ROOT))
            assert re.match(call_line, lines[site.line - 1].strip()), (compile_.id, site)


def test_seed_profile_records_all_cache_entries_and_the_limit(tmp_path, cli):
    out = tmp_path / "p.json"
    cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(seed("limit_hit.py")), check=0)
    frame = Profile.load(out).frame("fn")
    assert len(frame.compiles) == 9 and frame.limit_hits == 1 and frame.recompiles == 7
    # The limit-hit attempt carries the failures of all 8 cache entries, not only the newest.
    last = frame.compiles[-1]
    assert last.limit_hit and sum(r.kind == "size_mismatch" for r in last.reasons) == 8
    first = frame.compiles[1].reasons[0]
    assert (first.source, first.dim, first.expected, first.actual) == ("x", 0, 1, 2)


def test_profile_hashes_every_named_source(tmp_path, cli):
    out = tmp_path / "p.json"
    cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(seed("graph_break.py")), check=0)
    profile = Profile.load(out)
    import hashlib

    rel = str((seed("graph_break.py")).relative_to(ROOT))
    assert profile.sources[rel] == hashlib.sha256((seed("graph_break.py")).read_bytes()).hexdigest()
    assert profile.schema_version == 1 and profile.torch_version == torch.__version__
    gn = profile.frame("gn")
    assert [(b.location.line, b.count) for b in gn.graph_breaks] == [(21, 1)]
    assert "graph_break()" in gn.graph_breaks[0].reason


def test_a_mark_after_an_unmarked_graph_is_a_reason_of_its_own(tmp_path, cli):
    """torch guards a mark (pytorch PR #176341; 2.13 and 2.14 alike): a marked call after an
    unmarked warm-up at the same size recompiles, and the guard, which names no tensor, is RC024
    `dim_marking_added`, not "other"."""
    out = tmp_path / "profile.json"
    script = PROGRAMS / "reasons" / "marked_after_warmup.py"
    cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(script), check=0)
    (frame,) = Profile.load(out).frames
    assert (len(frame.compiles), [r.kind for r in frame.reasons()]) == (2, ["dim_marking_added"])
    # What RF001 reads to mark the warm-up too: the marks the program made, at each compile.
    assert [c.inputs["x"].get("marked") for c in frame.compiles] == [None, [0]]
