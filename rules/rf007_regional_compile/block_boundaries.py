"""What compiling the blocks one by one costs at their boundaries, and RF007's word where RF004
(``nested_compile_region`` on the block) could edit the same blocks: one of the two is kept
(``findings.arbitration``), never both.

Applied together they would do nothing useful (a block compiled on its own is a top-level
frame, where the region decorator only adds its restrictions), so where both rules could edit
the same blocks, one is chosen and the other gives no edit, with the reason:

* the program trains: RF007. ``nested_compile_region`` is unsafe in training (inductor can
  corrupt a reused region's gradients on torch 2.13 to 2.15, and the eager backend fails in its
  backward before torch 2.14), while blocks compiled one by one train exactly;
* inference: the faster to compile of the two whose steady state stays within 10% of the
  whole-model compile. RF007 compiles faster (about one block's time, against RF004's 1.2x to
  1.4x: the model's own graph is still traced around the region) and costs steady-state time at
  every block boundary, which grows with what a block's graph takes: about 15 us for each of
  its inputs, its parameters and buffers and its forward's arguments (torch 2.13, CPU: 13-19 us
  across tiny blocks, MLP blocks, the 32-block bench's and Llama's decoder layers;
  ``bench/block_boundary.py``, ``bench/compile_time.py``).
  So RF007 is chosen where the Profile timed the model's steady-state call and the boundaries
  add at most 10% to it; RF004 where they add more (small blocks: the region keeps the model
  one graph) or no steady-state call was timed (the model ran once, was compiled by
  `module.compile()` or a decorator, static mode). RF007 stays where RF004 gives no edit (a
  region the compile would reject, a pip package's block).
"""

from __future__ import annotations

from collections.abc import Iterable

from recompile_fix.findings.arbitration import Preference
from recompile_fix.findings.finding import Finding

__all__ = [
    "DEFAULT_GRAPH_INPUTS",
    "INFERENCE_BUDGET",
    "SECONDS_PER_INPUT",
    "boundary_inputs",
    "boundary_share",
    "preference",
]

# Steady-state time a block boundary costs once the blocks are compiled one by one, for each
# input of the block's graph (its parameters and buffers, and its forward's arguments): the guards
# on it and the compiled code's per-input work. torch 2.13, CPU, `python bench/block_boundary.py`.
SECONDS_PER_INPUT = 15e-6
# A block whose graph inputs were not recorded (an older Profile): a transformer block's.
DEFAULT_GRAPH_INPUTS = 13
# The most the boundaries may add to the profiled steady-state call for RF007 to be chosen.
INFERENCE_BUDGET = 0.10


def boundary_inputs(stacks: Iterable[tuple[int, int | None]]) -> int:
    """The graph inputs all block boundaries of one call pass: per stack, (blocks, graph inputs
    of one block or None)."""
    return sum(count * (DEFAULT_GRAPH_INPUTS if inputs is None else inputs) for count, inputs in stacks)


def boundary_share(inputs: int, steady_seconds: float | None) -> float | None:
    """What compiling the blocks one by one adds to a steady-state call of ``steady_seconds``,
    its boundaries passing ``inputs`` graph inputs (0.05: 5%); None when no call was timed."""
    if not steady_seconds or steady_seconds <= 0:
        return None
    return inputs * SECONDS_PER_INPUT / steady_seconds


def preference(regional: Finding, region: Finding) -> Preference:
    """RF007's ``regional`` Finding against ``region``, a nested compile region on the same
    blocks: keep the blocks compiled one by one when the program trains (either Finding saw it)
    or their boundaries add at most ``INFERENCE_BUDGET`` to the profiled steady-state call."""
    if regional.evidence.get("trains") or region.evidence.get("trains"):
        return Preference(
            keep=True,
            why="the program trains, and nested_compile_region is unsafe in training while blocks compiled one by "
            "one train exactly",
        )
    blocks = int(regional.evidence.get("blocks") or 0)
    inputs = int(regional.evidence.get("boundary_inputs") or 0)
    steady_ms = regional.evidence.get("steady_ms")
    share = boundary_share(inputs, steady_ms / 1000 if isinstance(steady_ms, (int, float)) else None)
    if share is None:
        return Preference(
            keep=False,
            why="inference, and no steady-state call of the compiled model was timed (it ran once, or was not "
            "compiled by `torch.compile(model)`), so the choice keeps the steady state of the whole-model compile; "
            "profile a run of several steps to weigh the blocks compiled one by one (RF007), which compile faster "
            "and add about 15 us per block boundary for each input of a block's graph",
        )
    if share <= INFERENCE_BUDGET:
        return Preference(
            keep=True,
            why=f"inference, and the profiled steady-state call took {steady_ms:.1f} ms, to which {blocks} block "
            f"boundaries add about {_percent(share)} (15 us for each of the {inputs} graph inputs they pass): within "
            f"{_percent(INFERENCE_BUDGET)} of the whole-model compile, and the blocks compile in about one block's "
            "time, below the region's (1.2x to 1.4x); `bench/compile_time.py` measures both",
        )
    return Preference(
        keep=False,
        why=f"inference, and the profiled steady-state call took {steady_ms:.1f} ms, to which {blocks} block "
        f"boundaries would add about {_percent(share)} (15 us for each of the {inputs} graph inputs they pass; more "
        f"than {_percent(INFERENCE_BUDGET)}): small blocks, where the region keeps the model one graph at a cold "
        "compile a little above one block's",
    )


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%"
