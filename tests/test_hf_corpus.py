"""Real model code: transformers models (tiny configs, random weights, nothing downloaded), called
the way people call them (keyword arguments, `model(**batch)`, positionally through a decorator,
a DynamicCache passed in or held on a module, `model.generate()`), each with the fix an engineer
made by hand (`hand_fix.py`, measured in staging/hf_corpus).

For each program: one `profile` + `apply` (unsafe fixes where the hand fix needed one: the
compile call's `dynamic=True` for generate()), then the original, the tool's program and the
hand fix run side by side (same seed, eager backend): the tool's program compiles no more often
than the hand fix, and every compiled call returned the same tensors as the original, bit for
bit (greedy decoding gives the same tokens). A program without `hand_fix.py` is at its floor
already (a sequence grown from one token: 0/1 specialisation): the tool must leave it alone.

`pytest tests/test_hf_corpus.py -s` prints the table of the closing note.
"""

import shutil

import pytest

from conftest import PROGRAMS, run_cli
from equivalence import assert_same_outputs, profile_recorded, run_recorded, total_compiles

HF = PROGRAMS / "hf"
CASES = sorted(p.name for p in HF.iterdir() if (p / "program.py").exists())
# The hand fix is an edit at the compile call (`dynamic=True`): unsafe (every input dynamic).
UNSAFE = {"generate_qwen2"}


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_profile_and_apply_compile_no_more_than_the_hand_fix(name, tmp_path):
    case = HF / name
    work = tmp_path / name
    work.mkdir()
    shutil.copy(case / "program.py", work / "program.py")
    _, before = profile_recorded(work, "program.py")  # the original's run is the profile run
    flags = ["--unsafe-fixes"] if name in UNSAFE else []
    applied = run_cli("apply", ".", *flags, cwd=work, check=0)
    fixed = (work / "program.py").read_text()

    after = run_recorded(work / "program.py", tmp_path)
    compared = assert_same_outputs(before, after, exact=True)
    hand_fix = case / "hand_fix.py"
    if hand_fix.exists():
        hand = run_recorded(hand_fix, tmp_path)
        assert total_compiles(after) <= total_compiles(hand), (before["compiles"], after["compiles"], hand["compiles"])
        assert total_compiles(after) < total_compiles(before)
        hand_count = total_compiles(hand)
    else:
        assert fixed == (case / "program.py").read_text(), applied.stdout + applied.stderr
        hand_count = total_compiles(before)
    print(
        f"\n| {name} | {total_compiles(before)} | {hand_count} | {total_compiles(after)} | "
        f"equal ({compared} tensors, exact) |"
    )
