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


def test_two_rules_dynamic_true_on_one_bare_decorator_is_written_once(tmp_path):
    """RF002 (an int offset used as a size) and RF015 (a global float) on one function: both write
    `dynamic=True` at its bare `@torch.compile`; `apply --unsafe-fixes` writes it once. Another
    keyword there (RF001's `isolate_recompiles=True`) overlaps and is left out, never composed
    into `@torch.compile(a=True)(b=True)`."""
    from dataclasses import replace

    from recompile_fix.edits.rewrite import rewrite
    from recompile_fix.rules import ALL_RULES

    program = PROGRAM.replace('@torch.compile(backend="eager")', "@torch.compile")
    profile, project = project_of(
        tmp_path, {"program.py": program}, frame_of([_global("MARGIN", 0.2)], name="loss", first_line=7, stack=[CALL])
    )
    (finding,) = RULE.plan(profile, project)
    assert finding.params["dynamic"] == "decorate"
    twin = replace(finding, rule="RF002", params=dict(finding.params))
    rules = {r.id: r for r in ALL_RULES}
    source = project.source("program.py")
    done = rewrite("program.py", source, [finding, twin], rules, root=tmp_path)
    assert done.after.count("@torch.compile(dynamic=True)\n") == 1 and len(done.applied) == 2, done.skipped
    isolate = replace(finding, rule="RF001", params=dict(finding.params, keyword="isolate_recompiles"))
    done = rewrite("program.py", source, [finding, isolate], rules, root=tmp_path)
    assert "@torch.compile(dynamic=True)\n" in done.after and ")(" not in done.after
    assert [f.rule for f, _ in done.skipped] == ["RF001"]


# The run's record of the compiled function's arguments and of what its graphs' float constants
# met: float32 tensors of rank 1.
_VECTOR = {"type": "Tensor", "dtype": "float32", "shape": [3]}
_RECORDED = {"float_operands": ["float32:1"], "inputs": {"a": _VECTOR, "b": _VECTOR}}


def _tensor_plan(tmp_path, program: str, files: dict[str, str] | None = None):
    frame = frame_of([_global("MARGIN", 0.2)], name="loss", first_line=7, stack=[CALL], **_RECORDED)
    profile, project = project_of(tmp_path, {"program.py": program, **(files or {})}, frame)
    return RULE.plan(profile, project), project


def test_a_global_read_only_in_tensor_arithmetic_becomes_a_0d_tensor_at_every_assignment(tmp_path):
    """Every assignment wrapped, the default dtype where the graphs met float32 tensors of rank 1
    (it computes as the float did), and no `dynamic=True` beside it."""
    (finding,), project = _tensor_plan(tmp_path, PROGRAM)
    assert finding.safety is Safety.SAFE and finding.message.endswith("assign it as a 0-d tensor"), finding.notes
    assert finding.location.line == 3 and finding.params["float64"] is False
    fixed = RULE.fix(finding, project.source("program.py"), "torch")
    assert [e.new_text for e in fixed] == ["torch.tensor(0.2)", "torch.tensor(0.2 + 0.1 * epoch)"]
    # Python arithmetic on it first (`1 - MARGIN`): float64, which does it as Python does.
    (finding,), _ = _tensor_plan(tmp_path, PROGRAM.replace("a - b + MARGIN", "(a - b) * (1 - MARGIN)"))
    assert finding.safety is Safety.SAFE and finding.params["float64"] is True


def test_a_printed_or_updated_global_keeps_dynamic_true_and_says_why(tmp_path):
    printed = PROGRAM + '    print("margin", MARGIN)\n'
    (dynamic,), _ = _tensor_plan(tmp_path, printed)
    assert dynamic.params.get("dynamic") == "add" and dynamic.unproven
    assert "no 0-d tensor: `MARGIN` is printed" in dynamic.notes[-1], dynamic.notes
    updated = PROGRAM.replace("    MARGIN = 0.2 + 0.1 * epoch\n", "    MARGIN += 0.1\n")
    (dynamic,), _ = _tensor_plan(tmp_path, updated)
    assert "updates it in place" in dynamic.notes[-1], dynamic.notes
    early = PROGRAM.replace("import torch\n\nMARGIN = 0.2\n", "MARGIN = 0.2\nimport torch\n\n")
    (dynamic,), _ = _tensor_plan(tmp_path, early)
    assert "before torch is imported" in dynamic.notes[-1], dynamic.notes


def test_a_global_another_profiled_file_names_is_unproven_with_dynamic_true_its_fallback(tmp_path):
    (tensor, dynamic), _ = _tensor_plan(tmp_path, PROGRAM, {"log.py": "from program import MARGIN\n"})
    assert tensor.unproven and "log.py names `MARGIN` too" in tensor.notes[0]
    assert dynamic.fallback and dynamic.params.get("dynamic") == "add"


def test_a_global_unpacked_from_a_tuple_gets_no_tensor(tmp_path):
    """`MARGIN, SCALE = ...` rebinds it to a float the wrap cannot reach: no 0-d tensor."""
    unpacked = PROGRAM.replace("    MARGIN = 0.2 + 0.1 * epoch\n", "    MARGIN, _ = 0.2 + 0.1 * epoch, None\n")
    (dynamic,), _ = _tensor_plan(tmp_path, unpacked)
    assert "unpacks a value into it" in dynamic.notes[-1], dynamic.notes
