"""RF015 dynamic-float: the rule's decisions on hand-written Profiles (tests/profiles.py), no torch
run. golden/RF015/dynamic_float runs the fix: 2 -> 1 compiles, bit for bit."""

from profiles import frame_of, project_of
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Location, Reason
from recompile_fix.rules import rule_by_id

RULE = rule_by_id("RF015")

PROGRAM = """\
import torch

MARGIN = 0.2


@torch.compile(backend="eager")
def loss(a, b):
    return torch.relu(a - b + MARGIN).mean()


for epoch in range(4):
    MARGIN = 0.2 + 0.1 * epoch
    loss(torch.ones(3), torch.zeros(3))
"""

CALL = Location("program.py", 13, 13, 4, 39, "<module>")


def _global(name: str, value, value_type: str = "float") -> Reason:
    return Reason(
        kind="global_value",
        text=f"G['{name}'] == {value!r}",
        source=f"G['{name}']",
        value=value,
        value_type=value_type,
        entry="0/0",
    )


def _plan(tmp_path, program=PROGRAM, reason=None, **fields):
    frame = frame_of([reason or _global("MARGIN", 0.2)], name="loss", first_line=7, stack=[CALL])
    profile, project = project_of(tmp_path, {"program.py": program}, frame, **fields)
    return RULE.plan(profile, project)


def test_a_global_float_that_changed_gets_dynamic_true_at_the_decorator(tmp_path):
    (finding,) = _plan(tmp_path)
    assert finding.safety is Safety.UNSAFE and finding.unproven
    assert finding.location.line == 6 and finding.params["dynamic"] == "add"
    assert finding.message.endswith("compile `loss` with `dynamic=True`")
    fixed = RULE.fix(finding, project_of(tmp_path, {"program.py": PROGRAM})[1].source("program.py"), "torch")
    assert [e.new_text for e in fixed] == [", dynamic=True"]


def test_under_dynamic_false_it_is_a_trade_off(tmp_path):
    (finding,) = _plan(tmp_path, PROGRAM.replace('backend="eager"', 'backend="eager", dynamic=False'))
    assert finding.unsafe_because == "trade-off" and finding.params["dynamic"] == "replace"
    assert any("every new value compiles again, PGO or not" in n for n in finding.notes)


def test_no_fix_under_cuda_graphs_or_a_torch_that_specialises_floats(tmp_path):
    (graphs,) = _plan(tmp_path, PROGRAM.replace('backend="eager"', 'mode="reduce-overhead"'))
    assert graphs.safety is Safety.NONE and "CUDA graphs" in graphs.notes[0]
    (old,) = _plan(tmp_path, torch_version="2.5.1")
    assert old.safety is Safety.NONE and "specialises every float" in old.notes[0]


def test_already_dynamic_reads_as_done_and_a_global_int_is_rf006s(tmp_path):
    program = PROGRAM.replace('backend="eager"', 'backend="eager", dynamic=True')
    (finding,) = _plan(tmp_path, program)
    source = project_of(tmp_path, {"program.py": program})[1].source("program.py")
    assert RULE.already_present(finding, source) == "line 6: `dynamic=True`"
    assert _plan(tmp_path, reason=_global("STEPS", 3, "int")) == []
