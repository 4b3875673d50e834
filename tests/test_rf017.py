"""RF017 contiguous-view: the rule's decisions on hand-written Profiles (tests/profiles.py), no torch
run (golden/RF017/last_token_sampler profiles, applies and runs its program)."""

from __future__ import annotations

from typing import Any

import pytest

from profiles import project_of, reasons_of
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import apply_edits
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Compile, Frame, Location
from recompile_fix.rules import rule_by_id

RULE = rule_by_id("RF017")

HEADER = """\
import torch
import torch.nn.functional as F


@torch.compile(backend="eager")
"""
SAMPLER = (
    HEADER
    + """\
def pick(logits, t=0.7):
    return F.softmax(logits / t, dim=-1).argmax(-1)


out = torch.randn(2, 5, 8)
print(pick(out[:, -1, :]))
"""
)
CALL = "pick(out[:, -1, :])"


def _frame(
    text: str, strides: list[list[int]], shapes: list[list[int]] | None = None, call: str = CALL, **more: Any
) -> Frame:
    """`pick` compiled at ``call`` once per entry of ``strides``."""
    line = text.splitlines().index(next(t for t in text.splitlines() if call in t)) + 1
    col = text.splitlines()[line - 1].index(call)
    site = Location(file="program.py", line=line, end_line=line, col=col, end_col=col + len(call), function="<module>")
    shapes = shapes or [[2, 8]] * len(strides)
    compiles = []
    for n, (stride, shape) in enumerate(zip(strides, shapes)):
        reasons = []
        if n:
            before = strides[n - 1]
            dim = next((d for d in range(len(stride)) if stride[d] != before[d]), 0)
            reasons = reasons_of([f"0/{n - 1}: tensor 'logits' stride mismatch at index {dim}. expected "
                                  f"{before[dim]}, actual {stride[dim]}"])  # fmt: skip
        inputs = {"logits": {"type": "Tensor", "shape": shape, "stride": stride, "dtype": "float32"}}
        compiles.append(Compile(id=f"0/{n}", reasons=reasons, stack=[site], inputs=inputs, backend="eager", **more))
    signature = {"positional": ["logits", "t"], "keyword_only": []}
    return Frame(file="program.py", first_line=5, name="pick", compiles=compiles, signature=signature)


def _plan(tmp_path, text: str, frame: Frame):
    profile, project = project_of(tmp_path, {"program.py": text}, frame)
    return RULE.plan(profile, project), project


def _applied(project, finding) -> str:
    source = SourceFile.read(project.root / finding.file)
    return apply_edits(source.text, RULE.fix(finding, source, "torch"))


def test_a_view_whose_outer_stride_grows_gets_a_contiguous_copy(tmp_path):
    (finding,), project = _plan(tmp_path, SAMPLER, _frame(SAMPLER, [[40, 1], [48, 1], [56, 1]]))
    assert finding.safety == Safety.SAFE, finding.notes
    assert finding.message.startswith("`out[:, -1, :]` passed to compiled `pick` is a view whose strides change")
    assert "print(pick(out[:, -1, :].contiguous()))" in _applied(project, finding)
    assert finding.covers == [
        {"frame": finding.covers[0]["frame"], "sources": ["logits"], "kinds": ["stride_mismatch"]}
    ]


def test_a_size_one_dimension_gets_a_clone_in_contiguous_format(tmp_path):
    frame = _frame(SAMPLER, [[40, 1], [48, 1]], shapes=[[1, 8], [1, 8]])
    (finding,), project = _plan(tmp_path, SAMPLER, frame)
    assert finding.safety == Safety.SAFE
    assert "pick(out[:, -1, :].clone(memory_format=torch.contiguous_format))" in _applied(project, finding)
    assert any("size 1" in note for note in finding.notes)


def test_a_shape_that_changes_too_is_left_to_rf001(tmp_path):
    frame = _frame(SAMPLER, [[40, 1], [48, 1]], shapes=[[2, 8], [3, 8]])
    assert _plan(tmp_path, SAMPLER, frame)[0] == []


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("    logits.div_(t)\n    return logits.argmax(-1)\n", "writes into `logits` in place (`.div_`"),
        ("    logits[logits < 0] = 0.0\n    return logits.argmax(-1)\n", "writes into `logits`"),
        ("    last = logits[:, :4]\n    last += 1\n    return logits.argmax(-1)\n", "writes into `logits` in place"),
        ("    return logits, logits.argmax(-1)\n", "returns `logits`"),
    ],
)
def test_no_fix_where_the_caller_would_see_the_copy(tmp_path, body, why):
    text = SAMPLER.replace("    return F.softmax(logits / t, dim=-1).argmax(-1)\n", body)
    (finding,), _ = _plan(tmp_path, text, _frame(text, [[40, 1], [48, 1]]))
    assert finding.safety == Safety.NONE
    assert why in finding.notes[0]


def test_unproven_where_the_tensor_goes_to_code_not_read(tmp_path):
    text = SAMPLER.replace("return F.softmax(logits / t, dim=-1)", "return top_k(logits, 3)")
    (finding,), _ = _plan(tmp_path, text, _frame(text, [[40, 1], [48, 1]]))
    assert finding.safety == Safety.UNSAFE and finding.unproven
    assert "passes `logits` to `top_k`" in finding.notes[0]


def test_unproven_where_the_innermost_layout_changes(tmp_path):
    """A transposed view: kernels read the copy in another order."""
    (finding,), _ = _plan(tmp_path, SAMPLER, _frame(SAMPLER, [[8, 1], [1, 2]]))
    assert finding.safety == Safety.UNSAFE
    assert "innermost dimension" in finding.notes[0]


def test_no_finding_where_the_call_passes_a_copy_already(tmp_path):
    copied = "pick(out[:, -1, :].contiguous())"
    text = SAMPLER.replace(CALL, copied)
    assert _plan(tmp_path, text, _frame(text, [[40, 1], [48, 1]], call=copied))[0] == []


def test_other_guards_beside_the_strides_at_every_recompile_make_it_unproven(tmp_path):
    """A sampler called with another temperature as well: where some recompile failed on the
    strides alone (prefill, then decode), the copy removes it: safe; where each one failed on the
    temperature too, the copy alone removes none: unproven."""
    frame = _frame(SAMPLER, [[40, 1], [48, 1], [40, 1]])
    frame.compiles[2].reasons += reasons_of(["0/1: t == 0.7"])
    (finding,), _ = _plan(tmp_path / "some", SAMPLER, frame)
    assert finding.safety == Safety.SAFE, finding.notes
    frame = _frame(SAMPLER, [[40, 1], [48, 1]])
    frame.compiles[1].reasons += reasons_of(["0/0: t == 0.7"])
    (finding,), _ = _plan(tmp_path / "each", SAMPLER, frame)
    assert finding.safety == Safety.UNSAFE and "other guards failed at each of these recompiles" in finding.notes[0]
