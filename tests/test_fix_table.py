"""`fix`'s closing table on hand-made runs: why each remaining recompile stays."""

from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.profile.model import Compile, Location, Reason
from recompile_fix.verify.fixpoint import why_it_stays

FRAME = "forward (train.py:71)"


def _recompile(*reasons: Reason, limit_hit: bool = False) -> Compile:
    return Compile(id="0/2", reasons=list(reasons), limit_hit=limit_hit)


def _size(source: str, expected: int, actual: int) -> Reason:
    text = f"tensor '{source}' size mismatch at index 0. expected {expected}, actual {actual}"
    return Reason("size_mismatch", text, source=source, dim=0, expected=expected, actual=actual)


GRAD = Reason("grad_mode", "GLOBAL_STATE changed: grad_mode", source="grad_mode")
TRAINING = Reason("training_flag", "self.training == True", source="self.training")


def _finding(source: str, safety: Safety, notes=(), guards=()) -> Finding:
    return Finding(
        "RF001",
        "train.py",
        Location("train.py", 90),
        f"`{source}` of compiled `forward` changes size in dim 0 (4 compiles): mark it dynamic before the call",
        safety,
        evidence={"frame": FRAME, "guards": list(guards)},
        notes=list(notes),
    )


def test_legitimate_recompiles():
    assert why_it_stays(_recompile(GRAD), FRAME, [], [], False) == "legitimate: grad mode (no_grad)"
    assert (
        why_it_stays(_recompile(TRAINING, GRAD), FRAME, [], [], False)
        == "legitimate: train vs eval mode; legitimate: grad mode (no_grad)"
    )


def test_the_first_reason_that_is_not_legitimate_decides():
    # Against the training entry the eval call fails on grad mode; against the eval entry of the
    # same mode on a size: that is why it compiles again.
    size = _size("idx", 1, 2)
    assert why_it_stays(_recompile(size, GRAD), FRAME, [], [], False).startswith("torch limitation: sizes 0 and 1")
    assert why_it_stays(_recompile(GRAD, _size("x", 16, 12)), FRAME, [], [], False) == (
        "no rule for this reason (size_mismatch)"
    )


def test_the_fix_that_would_have_removed_it():
    size = _size("x", 16, 12)
    dropped = [
        (_finding("x", Safety.SAFE), ["the command failed after the fix: exit code 1 (ConstraintViolationError)"])
    ]
    assert why_it_stays(_recompile(size), FRAME, [], dropped, False) == (
        "a fix did not verify: the command failed after the fix: exit code 1 (ConstraintViolationError)"
    )
    # A dropped fix of another value does not explain this one.
    other = [(_finding("targets", Safety.SAFE, guards=["tensor 'targets' size mismatch"]), ["crashed"])]
    assert why_it_stays(_recompile(size), FRAME, [], other, False) == "no rule for this reason (size_mismatch)"
    unsafe = [_finding("x", Safety.UNSAFE, notes=["`dynamic=True` makes every dimension dynamic"])]
    assert why_it_stays(_recompile(size), FRAME, unsafe, [], False) == (
        "a trade-off fix (RF001, with --unsafe-fixes): `dynamic=True` makes every dimension dynamic"
    )
    # An unproven fix stays only where `fix` never tried it (--rounds ran out): it is tried in safe mode.
    unsafe[0].unsafe_because = UNPROVEN
    assert why_it_stays(_recompile(size), FRAME, unsafe, [], False) == (
        "an unproven fix (RF001) that was not tried: `dynamic=True` makes every dimension dynamic"
    )
    none = [_finding("x", Safety.NONE, notes=["the call is inside a lambda or comprehension"])]
    assert why_it_stays(_recompile(size), FRAME, none, [], False) == (
        "no fix (RF001): the call is inside a lambda or comprehension"
    )
    assert why_it_stays(_recompile(size), "forward (other.py:1)", none, [], False) == (
        "no rule for this reason (size_mismatch)"
    )


def test_the_recompile_limit():
    limit = Reason("limit_hit", "hit config.recompile_limit (8)")
    assert why_it_stays(_recompile(limit, _size("x", 8, 9), limit_hit=True), FRAME, [], [], False).startswith(
        "the recompile limit"
    )


def test_a_finding_is_found_by_what_it_covers_as_the_accounting_reads_it():
    """RF006's evidence lists its frames (`frames`, not `frame`): the table said "no rule for
    this reason (module_attribute)" beside RF006's [no fix]. A finding that names the guarded
    source is preferred to one that covers every reason of the kind in the frame."""
    attribute = Reason("module_attribute", "self.active_layers == 2", source="self.active_layers", value=2)
    counter = Finding(
        "RF006",
        "train.py",
        Location("train.py", 12),
        "`Net.active_layers` is an int that changes between calls of compiled `forward`: it stays an int",
        Safety.NONE,
        evidence={"frames": [FRAME]},
        notes=["not a tensor: `Net.active_layers` indexes or slices `self.layers`"],
        covers=[{"frame": FRAME, "kinds": ["module_attribute", "scalar_value"]}],
    )
    dropout = Finding(
        "RF008",
        "train.py",
        Location("train.py", 9),
        "`self._modules['drop'].p` is a dropout probability that changes",
        Safety.UNSAFE,
        evidence={"frame": FRAME},
        notes=["bit-identical on CPU"],
        covers=[{"frame": FRAME, "sources": ["self._modules['drop'].p"], "kinds": ["module_attribute"]}],
    )
    assert why_it_stays(_recompile(attribute), FRAME, [dropout, counter], [], False) == (
        "no fix (RF006): not a tensor: `Net.active_layers` indexes or slices `self.layers`"
    )
    p = Reason("module_attribute", "self._modules['drop'].p == 0.1", source="self._modules['drop'].p")
    assert why_it_stays(_recompile(p), FRAME, [counter, dropout], [], False).startswith("a trade-off fix (RF008")


def test_a_call_the_fix_rewrote_under_inserted_marks_is_one_call_site(tmp_path):
    """The marks go in above a call whose argument the fix wraps: the per-call-site table maps
    the call's old line to its new one (it listed `0 -> 2` at line 36 and `4 -> 0` at line 34,
    one call site shown twice)."""
    from types import SimpleNamespace

    from recompile_fix.verify.fixpoint import _line_moves

    (tmp_path / "user").mkdir()
    (tmp_path / "work").mkdir()
    before = "import torch\n\nfor t in ts:\n    eps = step(x, t.item(), labels)\n    print(eps)\n"
    after = (
        "import torch\n\nfor t in ts:\n    torch._dynamo.mark_dynamic(x, 0)\n    torch._dynamo.mark_dynamic(labels, 0)\n"
        "    eps = step(x, torch.tensor(t.item(), dtype=torch.float64), labels)\n    print(eps)\n"
    )
    (tmp_path / "user" / "train.py").write_text(before)
    (tmp_path / "work" / "train.py").write_text(after)
    moved = _line_moves(SimpleNamespace(cwd=tmp_path / "user"), SimpleNamespace(cwd=tmp_path / "work"))
    assert [moved("train.py", line) for line in (1, 3, 4, 5)] == [1, 3, 6, 7]


def test_a_size_of_one_is_the_limitation_only_where_no_other_entry_failed_otherwise():
    """A trial's `generate()` with a new prompt length: the decode step's entry failed on its
    length 1, the prefill's on the old prompt length, which is why it compiled again (it read
    "0/1 specialisation"); a layer swapped for a wider one fails on its parameter's size 1,
    which no specialisation explains (parameters' shapes are static)."""
    prefill = _size("input_ids", 7, 9)
    assert why_it_stays(_recompile(_size("input_ids", 1, 9), prefill), FRAME, [], [], False) == (
        "no rule for this reason (size_mismatch)"
    )
    assert why_it_stays(_recompile(_size("input_ids", 1, 9)), FRAME, [], [], False).startswith("torch limitation")
    swapped = _size("fn._modules['2']._parameters['bias']", 1, 2)
    assert not why_it_stays(_recompile(swapped), FRAME, [], [], False).startswith("torch limitation")


def test_a_dropped_fix_is_found_where_the_kept_fixes_moved_the_frames_first_line():
    """A trial: RF015's `dynamic=True`, tried and dropped ("adds nothing"), was named "an
    unproven fix that was not tried" because the last run's frame starts two lines lower (the
    kept marks above it) than the one the finding covers."""
    value = Reason("global_value", "G['TAU'] == 0.1", source="G['TAU']", value=0.1)
    dynamic = _finding("TAU", Safety.UNSAFE)
    dynamic.unsafe_because = UNPROVEN
    dynamic.covers = [{"frame": "forward (train.py:69)", "sources": ["G['TAU']"]}]
    dropped = [(dynamic, ["adds nothing on this program"])]
    assert why_it_stays(_recompile(value), FRAME, [dynamic], dropped, False) == (
        "a fix did not verify: adds nothing on this program"
    )


def test_a_dropped_fix_of_a_resume_piece_is_found_where_the_break_moved():
    """The code after a graph break is named by its line (`torch_dynamo_resume_in_forward_at_74`):
    the kept fixes above it move that line too."""
    value = Reason("global_value", "G['TAU'] == 0.1", source="G['TAU']", value=0.1)
    dynamic = _finding("TAU", Safety.UNSAFE)
    dynamic.unsafe_because = UNPROVEN
    dynamic.covers = [{"frame": "torch_dynamo_resume_in_forward_at_72 (train.py:72)", "sources": ["G['TAU']"]}]
    dropped = [(dynamic, ["adds nothing on this program"])]
    later = "torch_dynamo_resume_in_forward_at_74 (train.py:74)"
    assert why_it_stays(_recompile(value), later, [dynamic], dropped, False) == (
        "a fix did not verify: adds nothing on this program"
    )
