"""recompile_fix.analysis.scalar_uses: where a Python number ends up, and whether a 0-d tensor would do the
same there (the question RF002, RF003 and RF006 ask before they edit)."""

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from recompile_fix.analysis.scalar_uses import BLOCKS, TENSOR, UNKNOWN, ScalarUses
from recompile_fix.analysis.source import SourceFile

CODE = textwrap.dedent("""
    import math
    import torch
    import torch.nn.functional as F
    from torch import nn
    from helpers import external_scale


    def direct(x, c):
        return x + c


    def scalar_math_first(x, c):
        return x * (c * c) + math.pi * c


    def loop(x, n):
        for _ in range(n):
            x = x * 2
        return x


    def branch(logits, temperature):
        if temperature == 0:
            return logits.argmax(-1)
        return torch.softmax(logits / temperature, -1)


    def dropout(x, p):
        return F.dropout(x, p, training=True)


    def shape(x, n):
        return x.view(n, -1)


    def scale(y, s):
        return y * s


    def through_helper(x, c):
        return scale(x, c)


    def half(s):
        return s / 2


    def helper_returns_number(x, c):
        return x * half(c)


    def eps_and_clamp(x, c):
        return torch.clamp(x, max=c) + F.layer_norm(x, (3,), eps=c)


    def via_local(x, c):
        factor = c * 3
        return x.mul(factor)


    def unreadable(x, c):
        return external_scale(x, c)


    def returned(x, c):
        return c * 2

    def returned_mixed(x, c):
        a, b = unknown_pair()
        return a + c * (b - a)


    def position(x, step):
        pos = torch.tensor([step], dtype=torch.long)
        return x * pos


    def returned_mixed_local(x, c):
        a, b = unknown_pair()
        eps = a + c * (b - a)
        return eps


    def converted(x, c):
        return x * int(c)


    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 3)
            self.bias = torch.zeros(3)

        def forward(self, x, t):
            h = self.proj(x)
            return h / t + self.bias * t
""")


@pytest.fixture(scope="module")
def source():
    return SourceFile.parse(Path("m.py"), CODE)


def uses(source, function, param, tensors):
    func = next(n for n in source.nodes(cst.FunctionDef) if n.name.value == function)
    return ScalarUses().of_parameter(source, "m.py", func, param, set(tensors))


@pytest.mark.parametrize(
    "function, param, tensors, verdicts, why",
    [
        ("direct", "c", {"x"}, [TENSOR], "tensor arithmetic"),
        ("loop", "n", {"x"}, [BLOCKS], "reaches `range()`"),
        ("branch", "temperature", {"logits"}, [BLOCKS, TENSOR], "decides a Python branch"),
        ("dropout", "p", {"x"}, [BLOCKS], "sets the dropout probability of `F.dropout()`"),
        ("shape", "n", {"x"}, [BLOCKS], "is used as a size or dim by `x.view()`"),
        ("through_helper", "c", {"x"}, [TENSOR], "tensor arithmetic"),
        ("eps_and_clamp", "c", {"x"}, [TENSOR, BLOCKS], "sets `eps` of `F.layer_norm()`"),
        ("via_local", "c", {"x"}, [TENSOR], "tensor arithmetic"),
        (
            "unreadable",
            "c",
            {"x"},
            [UNKNOWN],
            "is passed to `external_scale()`, whose source recompile-fix cannot read",
        ),
        ("returned", "c", {"x"}, [BLOCKS], "is returned as a Python number"),
        # A trial's guidance mix: `eps_uncond + w * (eps_cond - eps_uncond)`, its operands from an
        # unpacking the analysis cannot type: not "a Python number", as it said.
        (
            "returned_mixed",
            "c",
            {"x"},
            [BLOCKS],
            "is returned in `a + c * (b - a)`, whose other operands are not known to be tensors",
        ),
        # The same mix through a local (`eps = ...; return eps`): it said "a Python number" again.
        (
            "returned_mixed_local",
            "c",
            {"x"},
            [BLOCKS],
            "is returned in `eps`, computed with operands not known to be tensors",
        ),
        # A StaticCache position built in the compiled code: a symbolic int serves (RF002's
        # `dynamic_sources`), a 0-d tensor would give the new tensor its own dtype.
        ("position", "step", {"x"}, [BLOCKS], "is an element of the data `torch.tensor()` builds a tensor from"),
        (
            "converted",
            "c",
            {"x"},
            [BLOCKS],
            "is converted by `int()`",
        ),
        ("forward", "t", {"x"}, [TENSOR, TENSOR], "tensor arithmetic"),
    ],
)
def test_each_use_is_classified(source, function, param, tensors, verdicts, why):
    found = uses(source, function, param, tensors)
    assert [u.verdict for u in found] == verdicts
    assert any(u.why == why for u in found), [u.why for u in found]


def test_branch_use_names_the_line(source):
    blocked = next(u for u in uses(source, "branch", "temperature", {"logits"}) if u.verdict == BLOCKS)
    assert blocked.describe() == "decides a Python branch at m.py:24 (`if temperature == 0:`)"


def test_scalar_math_is_recorded_and_met_tensors_are_named(source):
    first = uses(source, "scalar_math_first", "c", {"x"})
    assert all(u.verdict == TENSOR and u.scalar_math and u.meets == ("x",) for u in first)
    assert uses(source, "direct", "c", {"x"})[0].scalar_math is False
    # Through a helper, the tensor it meets is named as the compiled function sees it.
    assert uses(source, "through_helper", "c", {"x"})[0].meets == ("x",)


def test_true_division_is_not_exact_for_an_int(source):
    (use,) = uses(source, "helper_returns_number", "c", {"x"})
    assert use.verdict == TENSOR and use.scalar_math and not use.int_exact
    (local,) = uses(source, "via_local", "c", {"x"})
    assert local.scalar_math and local.int_exact  # c * 3 stays exact in int64


def test_module_tensor_attributes_and_outputs_count_as_tensors(source):
    found = uses(source, "forward", "t", {"x"})
    assert {m for u in found for m in u.meets} == {"h", "self.bias"}


def test_blocking_uses_say_what_a_tensor_does_there(source):
    from recompile_fix.analysis.scalar_uses import consequence

    (converted,) = uses(source, "converted", "c", {"x"})
    assert consequence(converted) == "a 0-d tensor graph-breaks there on `.item()` and compiles more often"
    (loop,) = uses(source, "loop", "n", {"x"})
    assert consequence(loop) == "`range()` of a 0-d tensor graph-breaks and compiles more often"


def test_a_module_level_tensor_a_function_reads_is_a_tensor_there():
    """A trial's rotary helper slices `COS`, bound at module level to `emb.cos()`: a tensor's
    slice bound (it stays symbolic in a dynamic graph), not an index into a Python sequence. A
    function that binds the name itself (a parameter) keeps its own."""
    source = SourceFile.parse(
        Path("m.py"),
        textwrap.dedent("""
            import torch

            emb = torch.randn(64, 8)
            COS, SIN = emb.cos(), emb.sin()
            TABLE = [1, 2, 3]


            def rope(q, offset):
                return q * COS[offset : offset + 4]


            def pick(offset):
                return TABLE[offset : offset + 2]


            def shadowed(q, offset, COS):
                return q * COS[offset : offset + 4]
            """),
    )
    assert [u.kind for u in uses(source, "rope", "offset", {"q"})] == ["slice", "slice"]
    assert {u.kind for u in uses(source, "pick", "offset", set())} == {"sequence_index"}
    assert {u.kind for u in uses(source, "shadowed", "offset", {"q"})} == {"sequence_index"}
