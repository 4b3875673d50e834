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

The hand fixes' compiles are recorded (`hand_fix_compiles.json`: torch's metrics of one run of
each, on the release named there, with the digest of the file run): a hand fix runs again only on
another release, or where its file changed, and `pytest --update-golden` records them again.

`pytest tests/test_hf_corpus.py -s` prints the table of the closing note.
"""

import fcntl
import hashlib
import json
import shutil

import pytest
import torch

from conftest import PROGRAMS, run_cli
from equivalence import assert_same_outputs, profile_recorded, run_recorded, total_compiles

HF = PROGRAMS / "hf"
CASES = sorted(p.name for p in HF.iterdir() if (p / "program.py").exists())
# The hand fix is an edit at the compile call (`dynamic=True`): unsafe (every input dynamic).
UNSAFE = {"generate_qwen2"}
HAND_FIX_COMPILES = HF / "hand_fix_compiles.json"


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _recorded_hand_fixes() -> dict:
    return json.loads(HAND_FIX_COMPILES.read_text())


def _hand_fix_compiles(name: str, tmp_path, update: bool) -> int:
    """Torch's count of the compiles of one run of the case's hand fix: as recorded for this
    release and these bytes, else run (and, with --update-golden, recorded)."""
    hand_fix = HF / name / "hand_fix.py"
    recorded = _recorded_hand_fixes()
    kept = recorded["cases"].get(name)
    same_release = recorded["torch"] == torch.__version__.split("+")[0]
    if not update and same_release and kept is not None and kept["digest"] == _digest(hand_fix):
        return kept["compiles"]
    compiles = total_compiles(run_recorded(hand_fix, tmp_path))
    if update:
        with open(HAND_FIX_COMPILES, "r+") as record:  # pytest-xdist's workers record side by side
            fcntl.flock(record, fcntl.LOCK_EX)
            recorded = json.load(record)
            same_release = recorded["torch"] == torch.__version__.split("+")[0]
            cases = {
                **(recorded["cases"] if same_release else {}),
                name: {"digest": _digest(hand_fix), "compiles": compiles},
            }
            record.seek(0)
            record.truncate()
            json.dump(
                {"torch": torch.__version__.split("+")[0], "cases": dict(sorted(cases.items()))}, record, indent=1
            )
            record.write("\n")
    return compiles


def test_every_hand_fix_is_recorded_as_it_is():
    recorded = _recorded_hand_fixes()["cases"]
    assert set(recorded) == {name for name in CASES if (HF / name / "hand_fix.py").exists()}
    for name, kept in recorded.items():
        assert kept["digest"] == _digest(HF / name / "hand_fix.py"), (
            f"{name}/hand_fix.py changed since its compiles were recorded: "
            "`pytest tests/test_hf_corpus.py --update-golden` records them again"
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_profile_and_apply_compile_no_more_than_the_hand_fix(name, tmp_path, request):
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
    if (case / "hand_fix.py").exists():
        hand_count = _hand_fix_compiles(name, tmp_path, request.config.getoption("--update-golden"))
        assert total_compiles(after) <= hand_count, (before["compiles"], after["compiles"], hand_count)
        assert total_compiles(after) < total_compiles(before)
    else:
        assert fixed == (case / "program.py").read_text(), applied.stdout + applied.stderr
        hand_count = total_compiles(before)
    print(
        f"\n| {name} | {total_compiles(before)} | {hand_count} | {total_compiles(after)} | "
        f"equal ({compared} tensors, exact) |"
    )
