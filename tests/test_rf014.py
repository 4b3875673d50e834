"""RF014 float-attribute: the rule's decisions on hand-written Profiles (tests/profiles.py), no torch run."""

from profiles import frame_of, project_of
from recompile_fix.analysis.source import SourceFile
from recompile_fix.findings.finding import Safety
from recompile_fix.rules import rule_by_id

RULE = rule_by_id("RF014")

MARGIN = """\
import torch
import torch.nn as nn


class MarginLoss(nn.Module):
    def __init__(self, margin=0.5):
        super().__init__()
        self.margin = margin

    def forward(self, score):
        return (self.margin - score).clamp(min=0).mean()


criterion = MarginLoss()
compiled = torch.compile(criterion)
for epoch in range(3):
    criterion.margin = 0.5 + 0.25 * epoch
    compiled(torch.randn(4))
"""

_INPUTS = {
    "self": {"type": "Module", "class": "MarginLoss", "qualname": "MarginLoss", "defined_in": "program.py"},
    "score": {"type": "Tensor", "shape": [4], "dtype": "float32", "device": "cpu"},
}


def _frame(*values, **fields):
    """`forward` compiled once per value of `self.margin`, as the recorder keeps them."""
    frame = frame_of(*[[f"self.margin == {v}"] for v in values[:-1]], name="forward", first_line=10, **fields)
    for compile_, value in zip(frame.compiles, values):
        compile_.inputs = {**_INPUTS, "self.margin": {"type": "float", "value": value}}
    return frame


def _plan(tmp_path, program, frame):
    profile, project = project_of(tmp_path, {"program.py": program}, frame)
    return RULE.plan(profile, project)


def _fixed(finding, program):
    source = SourceFile.parse(None, program)
    text = program
    for edit in sorted(RULE.fix(finding, source, "torch"), key=lambda e: -e.start):
        text = text[: edit.start] + edit.new_text + text[edit.end :]
    return text


def test_every_assignment_becomes_a_tensor_met_directly_is_safe(tmp_path):
    """A margin met by a tensor directly: default dtype, bit-identical, safe; the `__init__`
    parameter is a number (default 0.5, the class built with no argument)."""
    [finding] = _plan(tmp_path, MARGIN, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert finding.params["float64"] is False
    fixed = _fixed(finding, MARGIN)
    assert "self.margin = torch.tensor(margin)\n" in fixed
    assert "criterion.margin = torch.tensor(0.5 + 0.25 * epoch)\n" in fixed


def test_python_arithmetic_first_is_float64_and_unproven(tmp_path):
    """`2 * self.margin` then meets `score.mean()`, whose rank the run did not record: a float64
    0-d tensor would make a 0-d float32 one float64."""
    program = MARGIN.replace("(self.margin - score)", "(2 * self.margin - score.mean())")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.UNSAFE and finding.unproven
    assert finding.params["float64"] is True
    assert "torch.tensor(0.5 + 0.25 * epoch, dtype=torch.float64)" in _fixed(finding, program)


def test_python_arithmetic_first_meeting_a_recorded_float_tensor_is_float64_and_safe(tmp_path):
    program = MARGIN.replace("(self.margin - score)", "(2 * self.margin - score)")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert finding.params["float64"] is True


def test_a_branch_on_it_makes_no_edit(tmp_path):
    program = MARGIN.replace(
        "        return (self.margin",
        "        if self.margin > 1.0:\n            return score.sum()\n        return (self.margin",
    )
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.NONE
    assert any("decides a Python branch" in note for note in finding.notes), finding.notes


def test_a_value_passed_in_from_outside_is_unproven(tmp_path):
    """`MarginLoss(margins[0])`: the source does not say it is a number."""
    program = MARGIN.replace("criterion = MarginLoss()", "criterion = MarginLoss(margins[0])")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.UNSAFE, finding.notes
    assert any("may not be a number" in note for note in finding.notes), finding.notes


def test_a_value_from_a_schedule_of_numbers_is_a_number(tmp_path):
    """A trial's focal loss: `for epoch, gamma in enumerate(gamma_schedule): focal.gamma = gamma`
    with `gamma_schedule = [0.0, 1.0, 2.0]` was "the value may not be a number"; a list of
    something else still is."""
    schedule = "schedule = [0.5, 0.75, 1.0]\nfor epoch, m in enumerate(schedule):\n    criterion.margin = m\n"
    program = MARGIN.replace("for epoch in range(3):\n    criterion.margin = 0.5 + 0.25 * epoch\n", schedule)
    assert schedule in program
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert "criterion.margin = torch.tensor(m)\n" in _fixed(finding, program)
    unknown = program.replace("schedule = [0.5, 0.75, 1.0]", "schedule = [load(0.5), 0.75]")
    [finding] = _plan(tmp_path, unknown, _frame(0.5, 0.75))
    assert any("may not be a number" in note for note in finding.notes), finding.notes


def test_another_class_attribute_of_the_same_name_is_left_alone(tmp_path):
    program = MARGIN.replace(
        "criterion = MarginLoss()",
        "class Settings:\n    margin = 0.0\n\n\nsettings = Settings()\nsettings.margin = 3.0\ncriterion = MarginLoss()",
    )
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert "settings.margin = 3.0" in _fixed(finding, program)


def test_an_attribute_whose_guard_torch_did_not_report_is_found_from_the_recorded_values(tmp_path):
    """Another guard failed first: the recorder's values of `self.margin` at each compile show it."""
    frame = frame_of(["self.depth == 0"], name="forward", first_line=10)
    for compile_, value in zip(frame.compiles, (0.5, 0.75)):
        compile_.inputs = {**_INPUTS, "self.margin": {"type": "float", "value": value}}
    [finding] = _plan(tmp_path, MARGIN, frame)
    assert finding.safety is Safety.SAFE
    assert finding.evidence["values"] == [0.5, 0.75]


def test_a_float_that_never_changed_is_not_a_finding(tmp_path):
    frame = frame_of(["self.depth == 0"], name="forward", first_line=10)
    for compile_ in frame.compiles:
        compile_.inputs = {**_INPUTS, "self.margin": {"type": "float", "value": 0.5}}
    assert _plan(tmp_path, MARGIN, frame) == []


def test_tensors_off_the_cpu_make_it_unproven(tmp_path):
    frame = _frame(0.5, 0.75)
    for compile_ in frame.compiles:
        compile_.inputs["score"] = {"type": "Tensor", "shape": [4], "dtype": "float32", "device": "cuda:0"}
    [finding] = _plan(tmp_path, MARGIN, frame)
    assert finding.safety is Safety.UNSAFE
    assert any("cuda:0" in note for note in finding.notes), finding.notes


def test_python_arithmetic_first_is_safe_where_the_graphs_float_constants_met_only_floating_tensors(tmp_path):
    """The recorder read each compile's graph: its float constants met a 1-d float32 tensor
    (`float_operands`), where a float64 0-d tensor computes as the float did."""
    program = MARGIN.replace("(self.margin - score)", "(2 * self.margin - score.mean())")
    frame = _frame(0.5, 0.75)
    for compile_ in frame.compiles:
        compile_.float_operands = ["float32:1"]
    [finding] = _plan(tmp_path, program, frame)
    assert finding.safety is Safety.SAFE, finding.notes
    assert finding.params["float64"] is True
    frame.compiles[-1].float_operands = ["float32:0", "float32:1"]  # a 0-d tensor: float64 would win
    [finding] = _plan(tmp_path / "zero_d", program, frame)
    assert finding.safety is Safety.UNSAFE
    frame.compiles[-1].float_operands = None  # a compile not read: not proven
    [finding] = _plan(tmp_path / "unread", program, frame)
    assert finding.safety is Safety.UNSAFE


def test_an_in_place_update_makes_it_float64(tmp_path):
    """`criterion.margin += 0.1` on a float32 tensor would accumulate in float32: float64 does as
    Python did."""
    program = MARGIN.replace("    criterion.margin = 0.5 + 0.25 * epoch\n", "    criterion.margin += 0.25\n")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.params["float64"] is True
    assert finding.safety is Safety.SAFE, finding.notes  # it meets `score`, recorded float32 of rank 1
    assert "self.margin = torch.tensor(margin, dtype=torch.float64)" in _fixed(finding, program)


def test_a_setattr_that_may_write_it_and_a_none_leave_it_unproven(tmp_path):
    program = MARGIN.replace(
        "    criterion.margin = 0.5 + 0.25 * epoch\n", '    setattr(criterion, "margin", 0.5 + 0.25 * epoch)\n'
    ).replace("criterion = MarginLoss()", "criterion = MarginLoss()\ncriterion.margin = 0.5")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.UNSAFE
    assert any("setattr" in note for note in finding.notes), finding.notes
    program = MARGIN.replace("criterion = MarginLoss()", "criterion = MarginLoss()\ncriterion.margin = None")
    [finding] = _plan(tmp_path / "none", program, _frame(0.5, 0.75))
    assert finding.safety is Safety.UNSAFE
    assert "torch.tensor(None" not in _fixed(finding, program)


def test_the_loss_a_model_holds_is_found_by_its_submodule(tmp_path):
    """torch spells it `self._modules['criterion'].margin`; the loop writes
    `model.criterion.margin`, which the source ties to the class through `Net.__init__`."""
    program = MARGIN.replace(
        "criterion = MarginLoss()\ncompiled = torch.compile(criterion)",
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.criterion = MarginLoss()\n\n    def forward(self, score):\n        return self.criterion(score)\n\n\n"
        "model = Net()\ncompiled = torch.compile(model)",
    ).replace("    criterion.margin = 0.5", "    model.criterion.margin = 0.5")
    frame = frame_of(["self._modules['criterion'].margin == 0.5"], name="forward", first_line=19)
    for compile_, value in zip(frame.compiles, (0.5, 0.75)):
        compile_.inputs = {
            "self": {"type": "Module", "class": "Net", "qualname": "Net", "defined_in": "program.py"},
            "score": {"type": "Tensor", "shape": [4], "dtype": "float32", "device": "cpu"},
            "self._modules['criterion'].margin": {"type": "float", "value": value},
        }
        compile_.float_operands = ["float32:1"]
    [finding] = _plan(tmp_path, program, frame)
    assert finding.safety is Safety.SAFE, finding.notes
    assert "model.criterion.margin = torch.tensor(0.5 + 0.25 * epoch)" in _fixed(finding, program)
    assert finding.covers[0]["sources"] == ["self._modules['criterion'].margin"]


def test_a_write_through_the_compiled_wrappers_orig_mod_is_tied_to_the_class(tmp_path):
    """A trial's DQN actor: `actor = torch.compile(EpsGreedy(q))`, then `actor._orig_mod.eps = ...`
    each step: the wrapper's `_orig_mod` is the module it compiled (it was "the source does not
    tie the object to the class": unproven, 4 -> 4 after a safe apply)."""
    program = MARGIN.replace(
        "criterion = MarginLoss()\ncompiled = torch.compile(criterion)", "compiled = torch.compile(MarginLoss())"
    ).replace("    criterion.margin = 0.5", "    compiled._orig_mod.margin = 0.5")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert "compiled._orig_mod.margin = torch.tensor(0.5 + 0.25 * epoch)\n" in _fixed(finding, program)


def test_a_format_string_in_the_loop_makes_it_float64_one_in_compiled_code_no_edit(tmp_path):
    """A float64 0-d tensor formats as the float did (`Tensor.__format__`); formatting it in
    compiled code would break the graph (`.item()`)."""
    program = MARGIN.replace(
        "    compiled(torch.randn(4))\n", '    compiled(torch.randn(4))\n    print(f"margin {criterion.margin}")\n'
    )
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert finding.params["float64"] is True
    program = MARGIN.replace(
        "        return (self.margin", '        print(f"{self.margin}")\n        return (self.margin'
    )
    [finding] = _plan(tmp_path / "compiled", program, _frame(0.5, 0.75))
    assert finding.safety is Safety.NONE
    assert any("formatted into a string" in note for note in finding.notes), finding.notes


def test_an_annotated_assignment_is_an_assignment(tmp_path):
    program = MARGIN.replace("        self.margin = margin\n", "        self.margin: float = margin\n")
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.SAFE, finding.notes
    assert "self.margin: torch.Tensor = torch.tensor(margin)" in _fixed(finding, program)


def test_a_field_of_a_module_output_is_taken_for_a_tensor_unproven(tmp_path):
    """A trial: `self.backbone(x).last_hidden_state` (a transformers output) is not typed by the
    source; the read was refused as "returned as a Python number". Taken for a tensor, the fix
    is one a run proves."""
    program = MARGIN.replace(
        "        return (self.margin - score).clamp(min=0).mean()",
        "        h = self.backbone(score).last_hidden_state\n        return (self.margin - h).clamp(min=0).mean()",
    )
    [finding] = _plan(tmp_path, program, _frame(0.5, 0.75))
    assert finding.safety is Safety.UNSAFE and finding.unproven, finding.notes
    assert any("last_hidden_state` taken for a tensor" in note for note in finding.notes), finding.notes
    # A model called by keyword (`self.vit(pixel_values=x).logits / self.temperature`, a trial's
    # ViT classifier): the same guess, where it read "not known to be tensors" and gave no fix.
    program = MARGIN.replace(
        "        return (self.margin - score).clamp(min=0).mean()",
        "        h = self.backbone(pixel_values=score).logits\n        return (self.margin - h).clamp(min=0).mean()",
    )
    [finding] = _plan(tmp_path / "keyword", program, _frame(0.5, 0.75))
    assert finding.safety is Safety.UNSAFE and finding.unproven, finding.notes
    assert any("logits` taken for a tensor" in note for note in finding.notes), finding.notes


def test_an_attribute_set_in_one_file_and_changed_in_another_is_fixed_in_both_or_neither(tmp_path):
    """The usual layout (the class sets it in `model.py`'s `__init__`, the loop in `train.py`
    changes it): one Finding per file, made together; where one file cannot be rewritten, the
    other is left as it is (a tensor beside a float would leave the recompiles)."""
    from recompile_fix.pipeline.write import rewrite_files

    model, _, driver = MARGIN.partition("\n\ncriterion = MarginLoss()\n")
    files = {"program.py": "import torch\nfrom model import MarginLoss\n\ncriterion = MarginLoss()\n" + driver,
             "model.py": model + "\n"}  # fmt: skip
    frame = frame_of(["self.margin == 0.5"], name="forward", first_line=10, file="model.py")
    for compile_, value in zip(frame.compiles, (0.5, 0.75)):
        compile_.inputs = {**_INPUTS, "self": {**_INPUTS["self"], "defined_in": "model.py"}}
        compile_.inputs["self.margin"] = {"type": "float", "value": value}
    profile, project = project_of(tmp_path, files, frame)
    findings = RULE.plan(profile, project)
    assert sorted(f.file for f in findings) == ["model.py", "program.py"]
    assert {f.safety for f in findings} == {Safety.SAFE} and len({f.params["together"] for f in findings}) == 1
    rewrites, failed = rewrite_files(tmp_path, findings, (RULE,))
    assert not failed and all(r.changed for r in rewrites)
    after = {r.path: r.after for r in rewrites}
    assert "self.margin = torch.tensor(margin)\n" in after["model.py"]
    assert "criterion.margin = torch.tensor(0.5 + 0.25 * epoch)\n" in after["program.py"]
    # program.py changed since planning: model.py is not rewritten either.
    rewrites, failed = rewrite_files(tmp_path, findings, (RULE,), planned_from={"program.py": "another digest"})
    assert [path for path, _ in failed] == ["program.py"]
    (model_rewrite,) = rewrites
    assert not model_rewrite.changed and "another file whose fix is left out" in model_rewrite.skipped[0][1]


def test_an_nn_dropouts_p_is_rf008s_not_a_float_of_the_users_class(tmp_path):
    """A trial's early-dropout schedule: RF014 said "[no fix] `p` ... cannot tell which class in
    the profiled files holds `p`" beside RF008's ScheduledDropout for the same guard. The guard's
    first use is torch's own dropout module: RF014 leaves it to RF008."""
    from recompile_fix.profile.model import Location, Reason

    program = (
        "import torch\nfrom torch import nn\n\n\nclass MLP(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.drop = nn.Dropout(0.1)\n\n    def forward(self, x):\n"
        "        return self.drop(x)\n"
    )
    dropout = Location("/site-packages/torch/nn/modules/dropout.py", 73, function="forward")

    def guard(value, first_use):
        text = f"self._modules['drop'].p == {value}"
        source = "self._modules['drop'].p"
        return Reason(
            kind="module_attribute", text=text, source=source, value=value, value_type="float", first_use=first_use
        )

    frame = frame_of([guard(0.1, dropout)], [guard(0.2, None)], name="forward", first_line=10)
    assert _plan(tmp_path, program, frame) == []
    frame = frame_of([guard(0.1, None)], [guard(0.2, None)], name="forward", first_line=10)
    assert [f.rule for f in _plan(tmp_path, program, frame)] == ["RF014"]  # whose `p` is not known


def test_a_module_of_the_users_inside_a_library_model_is_found_by_what_the_run_recorded(tmp_path):
    """A trial's LoRA layer swapped into a transformers model compiled whole: the frame is the
    library's decorator (`wrapped_func`), the guard `args[0]._modules['crit'].margin == 0.5`. The
    recorder names the class of the module holding it (the user's); without that record, library
    code's attribute is left alone."""
    holder = {"type": "Module", "class": "MarginLoss", "qualname": "MarginLoss", "defined_in": "program.py"}
    frame = frame_of(
        ["args[0]._modules['crit'].margin == 0.5"],
        ["args[0]._modules['crit'].margin == 0.75"],
        name="wrapped_func",
        file="/site-packages/transformers/utils/deprecation.py",
        first_line=121,
    )
    for compile_ in frame.compiles:
        compile_.inputs = {"args[0]._modules['crit']": holder, "args[1]": _INPUTS["score"]}
    [finding] = _plan(tmp_path, MARGIN, frame)
    assert finding.rule == "RF014" and "`MarginLoss.margin`" in finding.message, finding.message
    assert "criterion.margin = torch.tensor(0.5 + 0.25 * epoch" in _fixed(finding, MARGIN)
    # Not recorded (torch's guard manager listed no code part for it): by name, for a run to prove.
    for compile_ in frame.compiles:
        compile_.inputs = {"args[1]": _INPUTS["score"]}
    [guessed] = _plan(tmp_path / "unrecorded", MARGIN, frame)
    assert guessed.safety is Safety.UNSAFE and guessed.unproven
    assert any("did not record which module holds it" in note for note in guessed.notes), guessed.notes
    # A library class's own attribute, as recorded: no 0-d tensor (the library reads it, maybe as
    # a number), and no compile call found for `dynamic=True` (no user line on the stack here).
    library = {**holder, "defined_in": "/site-packages/transformers/loss.py"}
    for compile_ in frame.compiles:
        compile_.inputs = {"args[0]._modules['crit']": library, "args[1]": _INPUTS["score"]}
    [left] = _plan(tmp_path / "library", MARGIN, frame)
    assert left.safety is Safety.NONE and "is read by library code (MarginLoss in" in left.notes[0], left.notes


def test_a_library_class_float_the_loop_sets_gets_dynamic_true_where_the_model_is_compiled(tmp_path):
    """A trial's PatchTST pre-training: the loop anneals `model.model.masking.random_mask_ratio`,
    transformers' `PatchTSTMasking` reads it in `int(n * (1 - ratio))`: no 0-d tensor can take its
    place; `dynamic=True` at the user's `torch.compile(model)` is the candidate a run proves (the
    trial: 5 -> 2 compiles with the size marks, the outputs bit for bit)."""
    from recompile_fix.profile.model import Location

    program = (
        "import torch\n\nmodel = make_model()\ncmodel = torch.compile(model, backend='eager')\n"
        "for epoch in range(3):\n    model.model.masking.random_mask_ratio = 0.2 + 0.15 * epoch\n"
        "    cmodel(torch.randn(4, 32, 2))\n"
    )
    source = "self._modules['model']._modules['masking'].random_mask_ratio"
    frame = frame_of(
        [f"{source} == 0.2"],
        name="forward",
        file="/site-packages/transformers/models/patchtst/modeling_patchtst.py",
        first_line=1222,
        stack=[Location(file="program.py", line=7)],
    )
    masking = {"type": "Module", "class": "PatchTSTMasking", "qualname": "PatchTSTMasking"}
    masking["defined_in"] = "/site-packages/transformers/models/patchtst/modeling_patchtst.py"
    for compile_ in frame.compiles:
        compile_.inputs = {"self._modules['model']._modules['masking']": masking}
    [dynamic] = _plan(tmp_path, program, frame)
    assert dynamic.unproven and dynamic.location.line == 4, (dynamic.location, dynamic.notes)
    assert "is read by library code (PatchTSTMasking in" in " ".join(dynamic.notes)
    assert "cmodel = torch.compile(model, backend='eager', dynamic=True)" in _fixed(dynamic, program)


def _two_floats_frame(line: int):
    """`forward` compiled twice, `self.alpha` and `self.temperature` changed together, called at
    ``line`` (where the compiled module is called: its compile call is found from there)."""
    from recompile_fix.profile.model import Location

    frame = frame_of(
        ["self.alpha == 0.5"], name="forward", first_line=11, stack=[Location(file="program.py", line=line)]
    )
    for compile_, (alpha, temperature) in zip(frame.compiles, [(0.5, 4.0), (0.75, 3.5)]):
        compile_.inputs = {
            **_INPUTS,
            "self": {**_INPUTS["self"], "class": "Distillation", "qualname": "Distillation"},
            "self.alpha": {"type": "float", "value": alpha},
            "self.temperature": {"type": "float", "value": temperature},
        }
    return frame


DISTILLATION = """\
import torch
import torch.nn as nn


class Distillation(nn.Module):
    def __init__(self, alpha=0.5, temperature=4.0):
        super().__init__()
        self.alpha = alpha
        self.temperature = temperature

    def forward(self, score):
        t = self.temperature
        soft = score.div(t).softmax(-1).sum() * (t * t)
        return self.alpha * soft + (1 - self.alpha) * score.mean()


criterion = Distillation()
compiled = torch.compile(criterion, backend="eager")
for epoch in range(2):
    criterion.alpha, criterion.temperature = 0.5 + 0.25 * epoch, 4.0 - 0.5 * epoch
    compiled(torch.randn(4))
"""


def test_unsafe_0d_tensors_get_one_dynamic_true_at_the_compile_call_as_their_fallback(tmp_path):
    """A trial's distillation loss: both 0-d tensors unsafe (`(1 - self.alpha)` is Python arithmetic
    first, met by a 0-d mean: float64 would round otherwise), which `fix` dropped. One `dynamic=True`
    at the module's compile call stands in for both (the trial's hand fix: 3 -> 2 compiles, the
    checksum bit for bit); under the eager backend it trades no kernel, so it is unproven, for
    `fix` to keep, not a trade-off."""
    from recompile_fix.findings.finding import UNPROVEN, stands_in_for

    findings = _plan(tmp_path, DISTILLATION, _two_floats_frame(21))
    tensors = [f for f in findings if "wrap" in f.params]
    (dynamic,) = [f for f in findings if "compile_call" in f.params]
    assert len(tensors) == 2 and all(f.safety is Safety.UNSAFE for f in tensors), [f.notes for f in findings]
    assert dynamic.fallback and dynamic.unsafe_because == UNPROVEN and dynamic.location.line == 18
    assert dynamic.message.endswith(": compile `criterion` with `dynamic=True`"), dynamic.message
    assert "`Distillation.alpha` and `Distillation.temperature`" in dynamic.message
    assert all(stands_in_for(dynamic, f) for f in tensors)
    fixed = _fixed(dynamic, DISTILLATION)
    assert 'compiled = torch.compile(criterion, backend="eager", dynamic=True)\n' in fixed
    inductor = _plan(tmp_path, DISTILLATION.replace(', backend="eager"', ""), _two_floats_frame(21))
    (traded,) = [f for f in inductor if "compile_call" in f.params]
    assert traded.unsafe_because == "trade-off"  # inductor: every size dynamic in its kernels
