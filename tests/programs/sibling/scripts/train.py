"""Run from scripts/: imports a helper from the sibling folder common/ (not on any compile
stack), and compiles a function that a ragged last batch recompiles."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from batches import ragged_batches  # noqa: E402


@torch.compile
def scale(x):
    return x * 2 + 1


for batch in ragged_batches(rows=20, size=8):
    out = scale(batch)
print(f"last {tuple(out.shape)}")
