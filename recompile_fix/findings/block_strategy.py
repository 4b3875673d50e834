"""One compile-time fix per stack of blocks: RF004 (``nested_compile_region`` on the block) or
RF007 (the blocks compiled one by one instead of the whole model), never both.

Applied together they would do nothing useful (a block compiled on its own is a top-level
frame, where the region decorator only adds its restrictions), so where both rules could edit
the same blocks, one is chosen and the other gives no edit, with the reason:

* the program trains: RF007. ``nested_compile_region`` is unsafe in training (inductor can
  corrupt a reused region's gradients on torch 2.13 to 2.15, and the eager backend fails in its
  backward before torch 2.14), while blocks compiled one by one train exactly;
* inference: RF004, safe or unsafe. It keeps the whole model in one graph (steady state as the
  full compile), while RF007 runs the ops outside the blocks eagerly and calls each block as a
  graph of its own: on the 32-block bench (CPU, inductor) the steady-state forward took 92 ms
  compiled whole, 90 ms with the region and 101 ms with the blocks compiled one by one, for a
  cold compile of 1.24x and 0.95x one block's. RF007 stays where RF004 gives no edit (a region
  the compile would reject, a pip package's block).
"""

from __future__ import annotations

from collections.abc import Iterable

from recompile_fix.findings.finding import Finding, Safety

__all__ = ["choose_block_compile"]


def _same_stack(rf004: Finding, rf007: Finding) -> dict[str, str] | None:
    """The RF007 stack that holds RF004's blocks: the same class, and RF004's container path is
    (the end of) RF007's path from the compiled module."""
    block = rf004.params.get("class")
    container = str(rf004.evidence.get("container", ""))
    attr = container.split(".", 1)[1] if "." in container else container
    for stack in rf007.params.get("blocks", []):
        if stack.get("block") != block:
            continue
        path = str(stack.get("path", ""))
        if not attr or path == attr or path.endswith("." + attr):
            return {str(k): str(v) for k, v in stack.items()}
    return None


def choose_block_compile(findings: Iterable[Finding]) -> list[Finding]:
    """The findings, with the losing side of each RF004 / RF007 pair turned into no edit (in
    place; a finding that already gives no edit is left alone)."""
    findings = list(findings)
    regional = [f for f in findings if f.rule == "RF007" and f.fixable]
    for rf004 in [f for f in findings if f.rule == "RF004" and f.fixable]:
        for rf007 in regional:
            if not rf007.fixable or _same_stack(rf004, rf007) is None:
                continue
            where = f"{rf007.file}:{rf007.location.line}"
            trains = bool(rf004.evidence.get("trains") or rf007.evidence.get("trains"))
            if trains:
                _no_edit(
                    rf004,
                    f"RF007 compiles these blocks one by one instead ({where}): the program trains, and "
                    "nested_compile_region is unsafe in training while blocks compiled one by one train exactly",
                )
            else:
                _no_edit(
                    rf007,
                    f"RF004 marks `{rf004.params.get('class')}.forward` as a nested compile region instead "
                    f"({rf004.file}:{rf004.location.line}): the program runs inference only, where the "
                    "steady state counts; the region keeps the model one graph (32-block bench, CPU: full "
                    "92 ms, region 90 ms, blocks compiled one by one 101 ms) at a cold compile a little "
                    "above one block's (1.24x, against 0.95x); `bench/compile_time.py` measures both",
                )
            break
    return findings


def _no_edit(finding: Finding, why: str) -> None:
    finding.safety = Safety.NONE
    finding.notes.insert(0, why)
