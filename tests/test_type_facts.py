"""Issue 30, cause 5: RF002 refused where the text could not tell a tensor. A type test that only
moves a tensor to a device decides nothing (`type_tests`); a field of a module's output
(`unet(x, t).sample`) is taken for a tensor only as a guess, which makes the fix one a run proves
(`output_fields`)."""

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from recompile_fix.analysis.scalar_uses import BLOCKS, TENSOR, ScalarUses
from recompile_fix.analysis.source import SourceFile

CODE = textwrap.dedent("""
    import torch


    def moved(loss, n):
        if torch.is_tensor(n):
            n = n.to(loss.device)
        return loss / n


    def moved_if_given(loss, n):
        if n is not None and isinstance(n, torch.Tensor):
            n = n.to(device=loss.device, non_blocking=True)
        return loss / n


    def cast(loss, n):
        if torch.is_tensor(n):
            n = n.to(torch.float64)
        return loss / n


    def other_path(loss, n):
        if torch.is_tensor(n):
            n = n.to(loss.device)
        else:
            n = n + 1
        return loss / n


    def guided(model, x, g):
        out = model(torch.cat([x, x])).sample
        cond, uncond = out.chunk(2)
        return uncond + g * (cond - uncond)


    def metadata(x, g):
        return x.shape[0] * g


    def blend(x, alpha):
        return x * alpha + (1 - alpha) * x.sin() + alpha * torch.tanh(x)


    def own_dtype(x, alpha):
        return alpha * x.softmax(-1, dtype=torch.float64) + alpha * torch.sin(x, out=None)
""")


@pytest.fixture(scope="module")
def source():
    return SourceFile.parse(Path("m.py"), CODE)


def _uses(source, function, param, tensors, **options):
    func = next(n for n in source.nodes(cst.FunctionDef) if n.name.value == function)
    analysis = ScalarUses(**options)
    return analysis, analysis.of_parameter(source, "m.py", func, param, set(tensors))


@pytest.mark.parametrize("function", ["moved", "moved_if_given"])
def test_a_type_test_that_only_moves_a_tensor_decides_nothing(source, function):
    analysis, uses = _uses(source, function, "n", {"loss"})
    assert [u.verdict for u in uses] == [TENSOR]
    assert analysis.device_moves == ["m.py:6"] if function == "moved" else analysis.device_moves


@pytest.mark.parametrize("function", ["cast", "other_path"])
def test_a_type_test_that_changes_the_value_or_path_still_blocks(source, function):
    analysis, uses = _uses(source, function, "n", {"loss"})
    assert BLOCKS in {u.verdict for u in uses} and not analysis.device_moves


def test_a_module_output_field_is_a_tensor_only_when_asked_and_is_named(source):
    _, plain = _uses(source, "guided", "g", {"x"})
    assert BLOCKS in {u.verdict for u in plain}  # "returned as a Python number"
    analysis, guessed = _uses(source, "guided", "g", {"x"}, output_fields=True)
    assert [u.verdict for u in guessed] == [TENSOR]
    assert "model(torch.cat([x, x])).sample" in analysis.fields_taken


def test_a_tensor_s_metadata_is_never_taken_for_a_tensor(source):
    analysis, uses = _uses(source, "metadata", "g", {"x"}, output_fields=True)
    assert TENSOR not in {u.verdict for u in uses} and not analysis.fields_taken


def test_rf002_offers_the_guidance_scale_fix_as_one_a_run_proves(tmp_path):
    import shutil

    from golden_cases import GOLDEN
    from recompile_fix.analysis.project import Project
    from recompile_fix.profile.model import Profile
    from recompile_fix.rules.rf002_tensor_scalar import RULE as RF002

    case = GOLDEN / "RF002" / "dit_guidance_scale"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    profile = Profile.load(case / "profile.json")
    finding, fallback = RF002.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.safety.value == "unsafe" and finding.params["param"] == "guidance_scale"
    # `dynamic=True` in place of the call's `dynamic=False`: tried only where the tensor is not kept.
    assert fallback.fallback and fallback.unsafe_because == "trade-off"
    assert any(".sample` taken for a tensor" in n for n in finding.notes), finding.notes


def test_an_elementwise_op_s_result_has_its_input_s_dtype(source):
    """`x.sin()` and `torch.tanh(x)` are float tensors as `x` is: the run's dtype of `x` decides
    (the bench's float-argument row: `alpha` meets only float32 `x`, float64 is bit-identical)."""
    _, uses = _uses(source, "blend", "alpha", {"x"})
    assert {u.verdict for u in uses} == {TENSOR}
    assert {m for u in uses for m in u.meets} == {"x"}


def test_an_op_that_chooses_its_own_dtype_stands_for_itself(source):
    _, uses = _uses(source, "own_dtype", "alpha", {"x"})
    assert {m for u in uses for m in u.meets} == {"x.softmax(-1, dtype=torch.float64)", "torch.sin(x, out=None)"}
