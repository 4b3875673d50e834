"""The dtype of a 0-d tensor that takes a changing float's place (RF014's attribute, RF015's
global): the one whose results are the float's, from what the run recorded the number meeting
(the arguments it names, or every tensor the compiled graphs' float constants met)."""

from __future__ import annotations

from recompile_fix.analysis.scalar_uses import Use, distinct
from recompile_fix.analysis.torch_vocabulary import zero_d_computes_as_float
from recompile_fix.profile.model import Frame

__all__ = ["tensor_dtype"]


def tensor_dtype(
    uses: list[Use], frames: list[Frame], in_place: bool, formatted: bool, covered: bool
) -> tuple[bool, str | None, bool]:
    """Whether the tensor is float64, what leaves its results unproven (None: bit-identical), and
    whether they may be only close (a float32 tensor in place of a float64 one).

    A default-dtype (float32) 0-d tensor met directly computes as the Python float did beside a
    float32 tensor, or a half one of rank >= 1; beside a 0-d half tensor it makes the result
    float32, beside a float64 one it rounds the number first. A float64 one keeps Python's
    arithmetic on the number (``1 - alpha``, ``+=``) and computes as the float did beside a
    floating tensor of rank >= 1. Which tensors it meets: the arguments the run recorded that the
    source names, else every tensor the compiled graphs' float constants met (``covered``: every
    read is in compiled code, which those graphs are of)."""
    arith = [u for u in uses if not u.scalar_slot]
    inexact = distinct(u for u in uses if not u.exact)
    if inexact:
        return (
            False,
            f"a 0-d tensor computes close to the number, not bit-identically, at {inexact[0].describe()}",
            True,
        )
    scalar_math = next((u for u in arith if u.scalar_math), None)
    float64_only = next((u for u in uses if u.float64_only), None)
    float64 = bool(scalar_math or float64_only or in_place or formatted)
    tensors = {n: t for f in frames for n, t in f.tensor_inputs().items()}
    met = {m for u in arith for m in u.meets}
    operands: list[str] | None = None  # what the run recorded the number meeting: "dtype:rank"
    if met and all(m in tensors for m in met):
        operands = [f"{tensors[m].get('dtype')}:{len(tensors[m].get('shape') or ())}" for m in met]
    elif covered:
        found = [f.float_operands() for f in frames]
        if found and all(o is not None for o in found):
            operands = sorted({operand for each in found for operand in each or ()})
    if operands and all(zero_d_computes_as_float(o, float64) for o in operands):
        return float64, None, False
    if float64 and float64_only is None and operands and all(zero_d_computes_as_float(o, False) for o in operands):
        # A float64 0-d tensor beside a 0-d float32 one (a loss weight times a loss) makes the
        # result float64; the default dtype keeps every result's dtype, and rounds the Python
        # arithmetic on the number (`1 - alpha`, `+=`) in float32 where Python's was double.
        zero_d = sorted(o for o in operands if o.endswith(":0"))
        rounds = scalar_math is not None or in_place
        return (
            False,
            f"the run recorded it meeting 0-d tensors ({', '.join(zero_d)}), whose results a float64 0-d tensor "
            "would make float64: a float32 one, "
            + (
                "whose own arithmetic rounds in float32 (close, not bit for bit)"
                if rounds
                else "which meets them as the float did (formatted, it shows its float32 value)"
            ),
            rounds,
        )
    if scalar_math is not None:
        why = f"Python arithmetic on it comes first at {scalar_math.where} (`{scalar_math.code}`): float64"
    elif float64_only is not None:
        why = f"torch takes only a float64 0-d tensor at {float64_only.where} (`{float64_only.code}`): float64"
    elif in_place or formatted:
        why = "it is updated in place (`+=`) or formatted, which float64 does as the float did: float64"
    else:
        why = "met directly, a default-dtype 0-d tensor"
    where = "the compiled graphs" if covered else "the reads outside compiled code"
    return (
        float64,
        f"{why} computes as the float did beside "
        + ("floating tensors of rank >= 1" if float64 else "float32 tensors, or half ones of rank >= 1")
        + f", which the run did not record for {where}",
        False,
    )
