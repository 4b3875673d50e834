"""RF013 logging-break: the rule's decisions on hand-written Profiles (tests/profiles.py), no torch
run; the recorder's reading of torch's graph-break text; the golden case (golden/RF013/loss_type)
runs the real thing."""

import pytest

from profiles import frame_of, project_of
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import apply_edits
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.graph_breaks import logging_call
from recompile_fix.profile.model import Frame, GraphBreak, Location, Profile
from recompile_fix.rules import rule_by_id

RULE = rule_by_id("RF013")

HF = """\
import torch
from transformers import GPT2Config, GPT2LMHeadModel

model = GPT2LMHeadModel(GPT2Config(n_layer=1))
compiled = torch.compile(model)
for n in (4, 8):
    out = compiled(input_ids=torch.ones(1, n, dtype=torch.long))
"""

OWN = """\
import torch
from mylib import model


@torch.compile
def step(x):
    return model(x)


step(torch.ones(3))
"""

HF_FORWARD = "/site-packages/transformers/models/gpt2/modeling_gpt2.py"
HF_UTILS = "/site-packages/transformers/modeling_utils.py"
WARNING = GraphBreak(
    location=Location(file=HF_UTILS, line=4778),
    reason="logging.Logger method not supported for non-export cases",
    count=2,
    logger="transformers.modeling_utils",
    logger_method="warning_once",
)


def _site(text: str, line: int, call: str) -> Location:
    """Where CPython puts the call ``call...`` on ``line`` (the recorder keeps its span)."""
    row = text.splitlines()[line - 1]
    col = row.index(call)
    return Location("program.py", line, end_line=line, col=col, end_col=len(row.rstrip()))


def _hf_frames() -> list[Frame]:
    site = _site(HF, 7, "compiled(")
    called = frame_of(name="forward", file=HF_FORWARD, first_line=647, stack=[site])
    called.graph_breaks.append(WARNING)
    loss = frame_of(name="loss_function", file=HF_UTILS, first_line=4770, stack=[site])
    loss.graph_breaks.append(WARNING)
    return [called, loss]


def _fixed(finding, text: str) -> str:
    source = SourceFile.parse("program.py", text)
    return apply_edits(text, RULE.fix(finding, source, "torch"))


def test_transformers_loss_warning_sets_the_loss_it_falls_back_to(tmp_path):
    profile, project = project_of(tmp_path, {"program.py": HF}, *_hf_frames())
    (finding,) = RULE.plan(profile, project)
    assert finding.safety is Safety.SAFE and finding.location.line == 5
    after = _fixed(finding, HF)
    assert 'model.loss_type = "ForCausalLM"\ncompiled = torch.compile(model)\n' in after
    assert RULE.already_present(finding, SourceFile.parse("program.py", after)) == "`model.loss_type` is set"


def test_without_transformers_loss_function_the_logger_is_skipped_as_a_trade_off(tmp_path):
    frame = frame_of(name="step", file="program.py", first_line=5, stack=[_site(OWN, 10, "step(")])
    frame.graph_breaks.append(
        GraphBreak(
            location=Location(file="/site-packages/mylib/core.py", line=12),
            reason="logging.Logger method not supported for non-export cases",
            logger="mylib.core",
            logger_method="info",
        )
    )
    profile, project = project_of(tmp_path, {"program.py": OWN}, frame)
    (finding,) = RULE.plan(profile, project)
    assert finding.safety is Safety.UNSAFE and finding.unsafe_because == "trade-off"
    after = _fixed(finding, OWN)
    assert after.startswith("import torch\nfrom mylib import model\nimport logging\n")
    assert (
        "torch._dynamo.config.ignore_logger_methods.add(logging.getLogger('mylib.core').info)\n@torch.compile" in after
    )
    # torch before 2.6 has no such option: nothing is offered.
    old, project = project_of(tmp_path / "old", {"program.py": OWN}, frame, torch_version="2.5.1")
    assert RULE.plan(old, project) == []


def test_a_compile_the_rule_cannot_find_gets_no_edit_and_says_what_to_do(tmp_path):
    text = HF.replace("compiled = torch.compile(model)\n", "compiled = make_compiled(model)\n")
    profile, project = project_of(tmp_path, {"program.py": text}, *_hf_frames())
    (finding,) = RULE.plan(profile, project)
    assert finding.safety is Safety.NONE and "ignore_logger_methods" in finding.notes[0]


def test_no_logging_break_no_finding(tmp_path):
    frame = frame_of(name="step", file="program.py", first_line=5, stack=[_site(OWN, 10, "step(")])
    frame.graph_breaks.append(GraphBreak(location=Location(file="program.py", line=7), reason="print"))
    profile, project = project_of(tmp_path, {"program.py": OWN}, frame)
    assert RULE.plan(profile, project) == []


def test_the_logger_is_read_from_torchs_debug_context():
    text = (
        "Graph Break Reason: Encountered graph break when attempting to trace CALL\n\n"
        "logging.Logger method not supported for non-export cases\n"
        "  Developer debug context: method: <Logger transformers.modeling_utils (WARNING)>.warning_once, "
        "args: [ConstantVariable(str: 'x')], kwargs: {}\n"
    )
    assert logging_call(text) == ("transformers.modeling_utils", "warning_once")
    assert logging_call(text.replace("<Logger transformers.modeling_utils", "<RootLogger root")) == ("root", "info")[
        :1
    ] + ("warning_once",)
    assert logging_call("Graph Break Reason: Call to `torch._dynamo.graph_break()`") is None


def test_a_logger_method_that_is_not_a_name_is_a_damaged_profile(tmp_path):
    profile, _ = project_of(tmp_path, {"program.py": HF}, *_hf_frames())
    data = profile.to_json()
    data["frames"][0]["graph_breaks"][0]["logger_method"] = "info(); import os"
    with pytest.raises(UserError, match="not a method name"):
        Profile.from_json(data)


def _planned_at(tmp_path, text: str, line: int):
    """RF013's one finding on ``text``, the model called (`compiled(`) at ``line``."""
    site = _site(text, line, "compiled(")
    frames = _hf_frames()
    for frame in frames:
        for compile_ in frame.compiles:
            compile_.stack = [site]
    profile, project = project_of(tmp_path, {"program.py": text}, *frames)
    (finding,) = RULE.plan(profile, project)
    return finding


def test_a_model_built_in_the_compile_call_takes_the_loss_type_after_it(tmp_path):
    text = HF.replace(
        "model = GPT2LMHeadModel(GPT2Config(n_layer=1))\ncompiled = torch.compile(model)\n",
        "compiled = torch.compile(GPT2LMHeadModel(GPT2Config(n_layer=1)))\n",
    )
    finding = _planned_at(tmp_path, text, 6)
    assert finding.safety is Safety.SAFE
    after = _fixed(finding, text)
    assert "compiled = torch.compile(GPT2LMHeadModel(GPT2Config(n_layer=1)))\n# transformers" in after
    assert 'compiled.loss_type = "ForCausalLM"\nfor n in (4, 8):' in after


def test_a_model_built_and_compiled_in_a_function_takes_the_loss_type_there(tmp_path):
    """A trial: in `main()` the line went above `def main` (the def is a compound statement too),
    where `model` is not bound yet: the proof refused it and `apply` exited 2."""
    text = "def main():\n" + "".join(f"    {line}\n" for line in HF.splitlines()[3:]) + "\n\nmain()\n"
    text = "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\n\n" + text
    finding = _planned_at(tmp_path, text, 9)
    assert finding.safety is Safety.SAFE
    after = _fixed(finding, text)
    assert '    model.loss_type = "ForCausalLM"\n    compiled = torch.compile(model)\n' in after, after
