"""A float's assigned values wrapped in 0-d tensors (RF014's attribute, RF015's global): the edit
and what it promises."""

from __future__ import annotations

from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit

__all__ = ["bit_identical_note", "wrap_edits"]


def wrap_edits(
    file: str, spans: list[list[int]], float64: bool, source: SourceFile, torch_name: str, rule: str
) -> list[Edit]:
    """``value`` -> ``torch.tensor(value)`` (``dtype=torch.float64`` where ``float64``) at each span."""
    dtype = f", dtype={torch_name}.float64" if float64 else ""
    return [
        Edit(file, start, end, f"{torch_name}.tensor({source.text[start:end]}{dtype})", rule) for start, end in spans
    ]


def bit_identical_note(float64: bool) -> str:
    return "results are bit-identical: every read is tensor arithmetic, " + (
        "float64 computes the Python arithmetic on it as Python does" if float64 else "met directly"
    )
