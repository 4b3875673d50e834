"""RF005 graph-break-shield beyond the golden cases: the reasons it gives no fix, a first use
inside a called function, a global, no finding without a prefix, and the prefix frame compiling
once after the edit."""

import shutil

import pytest

from conftest import PROGRAMS, ROOT, run_cli
from equivalence import assert_same_outputs, run_recorded
from recompile_fix.analysis.project import Project
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Profile
from recompile_fix.rules import rule_by_id

RF005 = rule_by_id("RF005")
GOLDEN = ROOT / "golden" / "RF005"


def plan_golden(case, tmp_path):
    shutil.copy(GOLDEN / case / "program.in.py", tmp_path / "program.py")
    profile = Profile.load(GOLDEN / case / "profile.json")
    return RF005.plan(profile, Project(tmp_path, expected_hashes=profile.sources))


def test_seed_finding_is_unsafe_and_states_the_trade(tmp_path):
    (finding,) = plan_golden("seed_very_large_function", tmp_path)
    assert finding.safety is Safety.UNSAFE
    assert (finding.location.line, finding.params) == (11, {"function": "fn", "line": 11, "col": 4})
    assert "`fn` recompiles for each value of `c` (4 compiles)" in finding.message
    assert finding.evidence["guards"][0].startswith("0/0: c == 1")
    (trade,) = finding.notes
    assert trade.startswith("trade-off: the prefix (lines 10-10) compiles once")
    assert "two graphs" in trade and "still recompiles for each value" in trade


@pytest.mark.parametrize(
    "case, why",
    [
        ("fullgraph_frame", "`fn` is compiled with fullgraph=True (line 8): a graph break there is an error"),
        ("prefix_reads_value", "the prefix reads `n` (line 6) before the guarded use"),
    ],
)
def test_no_fix_says_why(case, why, tmp_path):
    (finding,) = plan_golden(case, tmp_path)
    assert finding.safety is Safety.NONE and finding.notes == [finding.notes[0]]
    assert finding.notes[0].startswith(why)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    work = tmp_path_factory.mktemp("rf005")
    shutil.copy(PROGRAMS / "rf005" / "uses_after_prefix.py", work / "program.py")
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=work, check=0)
    check = run_cli("apply", ".", "--check", "--select", "RF005", cwd=work, check=0)
    run_cli("apply", ".", "--unsafe-fixes", "--select", "RF005", cwd=work, check=0)
    return work, check.stdout


def test_callee_use_global_and_no_prefix(rewritten):
    work, check = rewritten
    text = (work / "program.py").read_text()
    # fn: the first use is in tail(), called from the frame's last statement: break before that call.
    assert "    z = torch.cos(y)\n    torch._dynamo.graph_break()\n    return tail(z, c)\n" in text
    # gn: a global int (`G['N'] == 1`), guarded on every change.
    assert "    y = torch.tanh(x) @ x.T\n    torch._dynamo.graph_break()\n    return y + N\n" in text
    # hn: nothing before the use: no finding at all.
    assert text.count("graph_break") == 2 and "`hn`" not in check
    assert "RF005 [unsafe fix] `gn` recompiles for each value of `G['N']`" in check


def test_prefix_frames_compile_once_after_the_edit(rewritten, tmp_path):
    work, _ = rewritten
    before = run_recorded(PROGRAMS / "rf005" / "uses_after_prefix.py", tmp_path)
    after = run_recorded(work / "program.py", tmp_path)
    assert_same_outputs(before, after)
    assert before["compiles"]["fn"] == 3 and before["compiles"]["gn"] == 3
    assert after["compiles"]["fn"] == 1 and after["compiles"]["gn"] == 1
