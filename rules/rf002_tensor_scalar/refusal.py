"""Why a number stays a number (a use that blocks a 0-d tensor), and where the code's own type
test makes the 0-d tensor a fix only a run can prove."""

from __future__ import annotations

import libcst as cst

from recompile_fix.analysis.scalar_uses import BLOCKS, TENSOR, UNKNOWN, Use, consequence, distinct

__all__ = ["other_path", "refusal"]


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
