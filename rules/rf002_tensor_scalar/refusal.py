"""Why a number stays a number (a use that blocks a 0-d tensor), and where the code's own type
test makes the 0-d tensor a fix only a run can prove."""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.scalar_uses import BLOCKS, TENSOR, UNKNOWN, Use, consequence, distinct
from recompile_fix.analysis.source import SourceFile, walk

__all__ = ["converted_dtype", "other_path", "refusal"]

# torch's dtype names as a `dtype=` keyword spells them, by the name the wrap writes.
_DTYPES = {
    "long": "int64",
    "int64": "int64",
    "int": "int32",
    "int32": "int32",
    "float": "float32",
    "float32": "float32",
    "double": "float64",
    "float64": "float64",
}


def refusal(param: str, func: cst.FunctionDef, uses: list[Use]) -> list[str] | None:
    """Why no 0-d tensor can take the number's place (a use that blocks one, or no tensor
    arithmetic at all), as the Finding's notes; None when one may."""
    blocking = distinct(u for u in uses if u.verdict == BLOCKS)
    if blocking:
        return [f"`{param}` {u.describe()}: {consequence(u)}; no edit" for u in blocking]
    if not any(u.verdict == TENSOR for u in uses) and not any(u.verdict == UNKNOWN for u in uses):
        return [f"`{param}` reaches no tensor arithmetic in `{func.name.value}`; no edit"]
    return None


def other_path(param: str, uses: list[Use]) -> list[str] | None:
    """Where the code tests the number's type (``if not torch.is_tensor(timesteps):``, as
    diffusers' models do), a 0-d tensor takes the path the code has for a tensor, and the other
    blocking uses may be on the number's path only: the wrap is a candidate a run proves (`fix`
    keeps it where the outputs are the same), never a safe fix. None without such a test."""
    blocking = distinct(u for u in uses if u.verdict == BLOCKS)
    tests = [u for u in blocking if u.kind == "type"]
    if not tests:
        return None
    notes = [
        f"`{param}` {u.describe()}: a 0-d tensor takes the path the code has for a tensor there, which the "
        "analysis does not follow; unproven: `fix` keeps it where a run computes the same"
        for u in tests
    ]
    notes += [f"`{param}` {u.describe()}: on the number's path, or a tensor's too" for u in blocking if u not in tests]
    return notes


def converted_dtype(
    uses: list[Use], file: str, func: cst.FunctionDef, source: SourceFile, dtype: str | None, exact: bool
) -> tuple[str | None, bool, list[str]]:
    """The 0-d tensor's dtype (``dtype``: the analysis' choice, None for int64), whether it keeps
    the results bit-identical, and a note: the dtype the number's own path makes a tensor of it
    with, where a use of it (``uses``, in ``file``, the file of ``func``) is a call that names one
    (``torch.tensor([timesteps], dtype=torch.long)``, diffusers' UNet2DModel: a float timestep
    becomes a long there). A 0-d tensor of that dtype computes as that path did (a float
    truncated toward zero, as there); whether the tensor's path does is the run's to show."""
    lines = {u.line for u in uses if u.file == file}
    for call in (n for n in walk(func) if isinstance(n, cst.Call)):
        if source.qualified_name(call.func) != "torch.tensor" or source.positions[call].start.line not in lines:
            continue
        named = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dtype"), None)
        if isinstance(named, cst.Attribute) and source.qualified_name(named) == f"torch.{named.attr.value}":
            converted = _DTYPES.get(named.attr.value)
            if converted is not None and converted != (dtype or "int64"):
                note = f"the number's path makes a {converted} tensor of it (`{source.code(call)}`): so does the wrap"
                return converted, False, [note]
    return dtype, exact, []
