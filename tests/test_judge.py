"""What a run must show before a fix is kept (recompile_fix/verify/judge.py, issue 30 causes 3
and 9), on hand-made runs: no fake fix, no program run.

* a fix whose run compiles as before (same compiles, same recompile reasons) changes nothing on
  this program: `verify` does not verify it, `select_verified` never keeps it; a rule that keeps
  the compiles on purpose (RF004) is not judged so;
* an unproven fix (the rule could not tell statically) must remove compiles, show outputs equal
  exactly (or within the tolerance its rule declares and names) and add no frame;
* in a set that verified together, a fix whose own recompiles all stay is tried out with one
  more run, and dropped when that run compiles alike; the proven fixes go together before the
  unproven ones are tried one by one;
* `fix`'s safe mode tries unproven fixes, never trade-offs, and names the trade-offs it left.
"""

from pathlib import Path

import torch

from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.write import select_fixes
from recompile_fix.profile.model import Compile, Frame, Location, Profile, Reason
from recompile_fix.verify.compare import Tolerance, compare_runs
from recompile_fix.verify.fixpoint import _candidates, _trade_offs
from recompile_fix.verify.judge import NO_OP, changes_nothing, proof_tolerance, suspects
from recompile_fix.verify.prove import select_verified
from recompile_fix.verify.render import render_text
from recompile_fix.verify.runs import CallableOutputs, Run


def _frame(name, line, sizes, *, source="x", file="prog.py"):
    """A frame compiled once per size in ``sizes``: each recompile for ``source``'s dim 0."""
    compiles = []
    for i, _size in enumerate(sizes):
        reasons = (
            []
            if i == 0
            else [Reason(kind="size_mismatch", text=f"tensor '{source}' size mismatch", source=source, dim=0)]
        )
        compiles.append(Compile(id=f"{line}/{i}", reasons=reasons, seconds={"dynamo": 0.1}))
    return Frame(file=file, first_line=line, name=name, compiles=compiles)


def _run(frames, outputs=None, exit_code=0):
    profile = Profile(command=["python", "prog.py"], torch_version=None, python_version="3", frames=frames)
    outs = {
        key: CallableOutputs(
            key=key,
            kind="function",
            qualname=key,
            name=key,
            file="prog.py",
            line=1,
            calls=len(tensors),
            outputs=[[t] for t in tensors],
        )
        for key, tensors in (outputs or {}).items()
    }
    return Run(profile=profile, exit_code=exit_code, outputs=outs, root=Path("."), log=Path("x.log"))


def _fix(rule="RF001", line=20, frame="fn (prog.py:10)", source="x", safety=Safety.SAFE, **more):
    return Finding(
        rule=rule,
        file="prog.py",
        location=Location("prog.py", line),
        message=f"mark `{source}`",
        safety=safety,
        covers=[{"frame": frame, "sources": [source]}],
        **more,
    )


ONES = {"fn": [torch.ones(2)]}


def test_a_run_that_compiles_as_before_changes_nothing():
    before = _run([_frame("fn", 10, range(8))], ONES)
    same = _run([_frame("fn", 11, range(8))], ONES)  # an inserted line moved the frame: still the same
    v = compare_runs(before, same, command=["x"], fixes=[_fix()], tolerance=Tolerance())
    assert not v.verified and v.no_op
    assert v.regressions == [f"{NO_OP}: compiles 8 -> 8, the same recompile reasons"]
    assert (
        render_text(v)
        .rstrip()
        .endswith("Not kept: the fixes change nothing on this program: compiles 8 -> 8, the same recompile reasons.")
    )
    # Fewer compiles, or the same count for another reason (the next round's to fix): a change.
    fewer = _run([_frame("fn", 10, range(1))], ONES)
    assert compare_runs(before, fewer, command=["x"], fixes=[_fix()], tolerance=Tolerance()).verified
    moved = _run([_frame("fn", 10, range(8), source="y")], ONES)
    assert not changes_nothing(before.profile, moved.profile)
    # RF004 keeps the compiles on purpose (each is cheaper): not "changes nothing".
    region = _fix(rule="RF004")
    v = compare_runs(before, same, command=["x"], fixes=[region], tolerance=Tolerance(), allows={"same_compiles"})
    assert v.verified and not v.no_op


def test_an_unproven_fix_must_remove_compiles_keep_outputs_exactly_and_add_no_frame():
    unproven = _fix(safety=Safety.UNSAFE, unsafe_because=UNPROVEN)
    before = _run([_frame("fn", 10, range(3))], ONES)
    # Outputs within assert_close's defaults but not bit for bit: the rule declared no tolerance.
    close = _run([_frame("fn", 10, range(1))], {"fn": [torch.ones(2) + 1e-7]})
    v = compare_runs(before, close, command=["x"], fixes=[unproven], tolerance=Tolerance())
    assert not v.verified and v.tolerance.exact
    assert any(r.startswith("outputs differ: fn") for r in v.regressions)
    assert "outputs compared exactly, as RF001's unproven fix at prog.py:20: its rule declares no tolerance" in v.notes
    # The rule declares and names a tolerance: held to it.
    rounding = _fix(safety=Safety.UNSAFE, unsafe_because=UNPROVEN, tolerance={"why": "float32 rounding"})
    v = compare_runs(before, close, command=["x"], fixes=[rounding], tolerance=Tolerance())
    assert v.verified, v.regressions
    assert proof_tolerance([rounding], Tolerance(exact=True))[0].exact  # never looser than the user asked
    # The same compiles with other reasons (not a no-op): an unproven fix must still remove some.
    other = _run([_frame("fn", 10, range(3), source="y")], ONES)
    v = compare_runs(before, other, command=["x"], fixes=[unproven], tolerance=Tolerance())
    assert v.regressions == ["an unproven fix must remove compiles (RF001 at prog.py:20): compiles 3 -> 3"]
    # No tensor to compare: nothing proves the outputs.
    v = compare_runs(_run([_frame("fn", 10, range(3))]), _run([_frame("fn", 10, range(1))]), command=["x"],
                     fixes=[unproven], tolerance=Tolerance())  # fmt: skip
    assert any("needs outputs to compare" in r for r in v.regressions)
    # A new frame that compiles once passes for a proven fix that removes more, never for an unproven one.
    split = _run([_frame("fn", 10, range(1)), _frame("helper", 30, range(1))], ONES)
    assert compare_runs(before, split, command=["x"], fixes=[_fix()], tolerance=Tolerance()).verified
    v = compare_runs(before, split, command=["x"], fixes=[unproven], tolerance=Tolerance())
    assert v.regressions == ["new compiled frame: helper (prog.py:30): 1 compiles"]


def test_suspects_are_the_fixes_whose_recompiles_all_stay():
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(3), source="y")])
    after = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(3), source="y")])
    good, idle = _fix(), _fix(line=50, frame="gn (prog.py:40)", source="y")
    assert suspects(before.profile, after.profile, [good, idle], set()) == [idle]
    assert suspects(before.profile, after.profile, [good, idle], {"RF001"}) == []
    static = _fix(line=60)
    static.covers = []  # names no recompile: a suspect only when the set removed nothing
    assert suspects(before.profile, after.profile, [static], set()) == []
    assert suspects(before.profile, before.profile, [static], set()) == [static]
    # Beside a fix that names the recompiles removed, a static one cannot claim them.
    assert suspects(before.profile, after.profile, [good, static], set()) == [static]


def test_select_verified_drops_a_static_fix_the_named_fix_did_the_work_of():
    """Two compiled optimizer steps, one found from its recompiles, one static: the set verifies
    (outputs close), but the run without the static fix compiles alike: it goes."""
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(2), source="y")], ONES)
    fixed = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(2), source="y")], ONES)
    good, static = _fix(), _fix(line=60)
    static.covers = []
    trials = _Trials({(20, 60): fixed, (20,): fixed})
    picked = select_verified(before, [good, static], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [good] and [f for f, _ in picked.dropped] == [static]
    assert trials.asked == [(20, 60), (20,)]


class _Trials:
    """A fake ``trial``: the run each set of fixes gives, from a table keyed by the rules' lines."""

    def __init__(self, runs):
        self.runs, self.asked = runs, []

    def __call__(self, fixes, what):
        key = tuple(sorted(f.location.line for f in fixes))
        self.asked.append(key)
        return self.runs[key]


def test_select_verified_drops_a_fix_that_changes_nothing_with_one_more_run():
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(3), source="y")], ONES)
    fixed = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(3), source="y")], ONES)
    good, idle = _fix(), _fix(line=50, frame="gn (prog.py:40)", source="y")
    trials = _Trials({(20, 50): fixed, (20,): fixed})
    picked = select_verified(before, [good, idle], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [good] and picked.last is fixed
    assert [(f.location.line, why[0].split(":")[0]) for f, why in picked.dropped] == [(50, NO_OP)]
    assert trials.asked == [(20, 50), (20,)]
    assert picked.verification is not None and picked.verification.verified


def test_select_verified_tries_the_proven_fixes_together_then_each_unproven_one():
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(3), source="y")], ONES)
    crashed = _run([], exit_code=1)
    fixed = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(3), source="y")], ONES)
    a, b = _fix(line=20), _fix(line=21)
    wrong = _fix(line=50, frame="gn (prog.py:40)", source="y", safety=Safety.UNSAFE, unsafe_because=UNPROVEN)
    trials = _Trials({(20, 21, 50): crashed, (20, 21): fixed})
    picked = select_verified(before, [a, b, wrong], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [a, b] and [f for f, _ in picked.dropped] == [wrong]
    assert trials.asked == [(20, 21, 50), (20, 21), (20, 21, 50)]


def test_select_verified_tries_the_proven_fixes_together_before_a_trade_off_that_failed_the_run():
    """A new user's trial (GPT-2, --unsafe-fixes): `dynamic=True` tripped an assertion in torch,
    so the joint trial failed; one at a time, the second proven fix was judged on top of the first
    alone and dropped, ending at 12 -> 9 where plain `fix` reached 12 -> 2. The proven fixes are
    tried together first, the trade-off on its own after them."""
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(3), source="y")], ONES)
    crashed = _run([], exit_code=1)
    fixed = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(1), source="y")], ONES)
    a, b = _fix(line=20), _fix(line=21, frame="gn (prog.py:40)", source="y")
    dynamic = _fix(line=50, safety=Safety.UNSAFE, unsafe_because=TRADE_OFF)
    trials = _Trials({(20, 21, 50): crashed, (20, 21): fixed})
    picked = select_verified(before, [a, dynamic, b], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [a, b] and [f for f, _ in picked.dropped] == [dynamic]
    assert trials.asked == [(20, 21, 50), (20, 21), (20, 21, 50)]


class _Regional(Rule):
    id = "RF007"


def test_safe_fix_tries_unproven_fixes_and_names_the_trade_offs_it_leaves():
    safe = _fix(line=20)
    unproven = _fix(line=21, safety=Safety.UNSAFE, unsafe_because=UNPROVEN)
    trade = _fix(rule="RF007", line=22, safety=Safety.UNSAFE)
    assert trade.unsafe_because == TRADE_OFF  # what a rule that does not say files
    none = _fix(line=23, safety=Safety.NONE)
    assert _candidates([safe, unproven, trade, none], unsafe_fixes=False) == [safe, unproven]
    assert _candidates([safe, unproven, trade, none], unsafe_fixes=True) == [safe, unproven, trade]
    profile = _run([_frame("fn", 10, range(4))]).profile
    assert _trade_offs(profile, [safe, unproven, trade, none]) == [(trade, 3)]
    round_trip = Finding.from_json(unproven.to_json())
    assert round_trip.unproven and round_trip.tolerance is None


def test_fixes_kept_each_on_its_own_terms_are_summed_up_on_the_users_terms():
    """An unproven mark (held exactly: a mark changes no number) and an unproven 0-d tensor that
    may round (assert_close): together the exact check fails on the tensor's rounding, so each is
    tried on its own and kept. The summary of the kept set compares the outputs with the user's
    tolerance: `fix` said "Fixed 5 verified" over a table that said "differ" (a trial)."""
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(3), source="y")], ONES)
    rounded = {"fn": [torch.ones(2) + 1e-7]}
    marked = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(3), source="y")], ONES)
    both = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(1), source="y")], rounded)
    mark = _fix(line=20, safety=Safety.UNSAFE, unsafe_because=UNPROVEN)
    tensor = _fix(
        rule="RF002",
        line=50,
        frame="gn (prog.py:40)",
        source="y",
        safety=Safety.UNSAFE,
        unsafe_because=UNPROVEN,
        tolerance={"why": "a 0-d tensor rounds where the number did not"},
    )
    trials = _Trials({(20, 50): both, (20,): marked})
    picked = select_verified(before, [mark, tensor], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [mark, tensor] and trials.asked == [(20, 50), (20,), (20, 50)]
    assert picked.verification is not None and picked.verification.verified
    assert all(o.same for o in picked.verification.outputs)
    text = render_text(picked.verification)
    assert "DIFFER" not in text and "Verified: compiles 6 -> 2" in text


def test_no_fewer_compiles_is_not_called_verified():
    before = _run([_frame("fn", 10, range(3))], ONES)
    moved = _run([_frame("fn", 10, range(3), source="z")], ONES)  # another guard fails now
    v = compare_runs(before, moved, command=["x"], fixes=[_fix()], tolerance=Tolerance())
    assert v.verified
    text = render_text(v)
    assert "Verified" not in text and "Nothing worse, but no fewer compiles: compiles 3 -> 3" in text


def test_fixes_that_only_help_together_are_kept_together_after_another_failed():
    """A sampler's `t` and `beta` recompile until both are tensors: alone, each changes nothing;
    with a third fix that breaks the program, the first joint try fails. After each is tried
    alone, the idle ones are tried together once more (a trial: 2 -> 2 each, 2 -> 1 together)."""
    before = _run([_frame("fn", 10, range(2))], ONES)
    crashed = _run([], exit_code=1)
    fixed = _run([_frame("fn", 10, range(1))], ONES)
    t, beta = _fix(rule="RF002", line=20), _fix(rule="RF002", line=21)
    bad = _fix(rule="RF002", line=22)
    trials = _Trials({(20, 21, 22): crashed, (20,): before, (21,): before, (22,): crashed, (20, 21): fixed})
    picked = select_verified(before, [t, beta, bad], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [t, beta] and [f for f, _ in picked.dropped] == [bad]
    assert trials.asked == [(20, 21, 22), (20,), (21,), (22,), (20, 21)]


def test_an_unproven_fix_kept_in_a_set_is_tried_out_where_the_proven_ones_alone_compile_no_more():
    """A new user's GAN: four proven marks and an unproven one, together 8 -> 5 (verified, kept);
    the proven four alone make 4: the unproven mark added a compile, and goes. Where the proven
    ones alone compile more, the set stays; where no recompile remains, no run is spent on it."""
    before = _run([_frame("fn", 10, range(8))], ONES)
    together = _run([_frame("fn", 10, range(5))], ONES)
    proven_alone = _run([_frame("fn", 10, range(4))], ONES)
    proven = _fix(line=20)
    unproven = _fix(line=22, safety=Safety.UNSAFE, unsafe_because=UNPROVEN)
    trials = _Trials({(20, 22): together, (20,): proven_alone})
    picked = select_verified(before, [proven, unproven], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [proven] and picked.last is proven_alone and trials.asked == [(20, 22), (20,)]
    ((dropped, why),) = picked.dropped
    assert dropped is unproven and why == [
        "adds nothing on this program: the fixes the rules proved compile it 4 times alone, 5 with it"
    ]

    trials = _Trials({(20, 22): proven_alone, (20,): together})  # the unproven one pays
    picked = select_verified(before, [proven, unproven], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [proven, unproven] and picked.dropped == [] and trials.asked == [(20, 22), (20,)]

    once = _run([_frame("fn", 10, range(1))], ONES)
    trials = _Trials({(20, 22): once})
    picked = select_verified(before, [proven, unproven], trials, (), command=["x"], tolerance=Tolerance())
    assert picked.kept == [proven, unproven] and trials.asked == [(20, 22)]


def _alternatives():
    """RF003's two ways to fix one recompile: a tensor lr, and `dynamic=True` in its place."""
    preferred = _fix(rule="RF003", line=20, safety=Safety.UNSAFE, unsafe_because=UNPROVEN, tolerance={"why": "rounds"})
    fallback = _fix(rule="RF003", line=30, safety=Safety.UNSAFE, unsafe_because=UNPROVEN, fallback=True)
    return preferred, fallback


def test_a_fallback_is_tried_only_where_its_preferred_fix_is_not_kept():
    """The tensor lr rounds (plain `fix` wants the outputs bit for bit): dropped; `dynamic=True`,
    its fallback, is tried next, alone, and kept. Where the tensor lr is kept, the fallback is
    neither tried nor reported."""
    before = _run([_frame("fn", 10, range(3))], ONES)
    rounded = _run([_frame("fn", 10, range(1))], {"fn": [torch.ones(2) + 1e-7]})
    exact = _run([_frame("fn", 10, range(1))], ONES)
    preferred, fallback = _alternatives()
    trials = _Trials({(20,): rounded, (30,): exact})
    exactly = Tolerance(unproven_exact=True)
    picked = select_verified(before, [fallback, preferred], trials, (), command=["x"], tolerance=exactly)
    assert picked.kept == [fallback] and [f for f, _ in picked.dropped] == [preferred]
    assert trials.asked == [(20,), (30,)]

    within = Tolerance(unproven_exact=False)  # fix --unsafe-fixes: the rule's rounding allowed
    trials = _Trials({(20,): exact})
    picked = select_verified(before, [fallback, preferred], trials, (), command=["x"], tolerance=within)
    assert picked.kept == [preferred] and picked.dropped == [] and trials.asked == [(20,)]

    # With --unsafe-fixes the tensor lr is kept though it rounds: the fallback is tried in its
    # place, and kept instead, being bit for bit for as many compiles (a new user's trial:
    # `fix --unsafe-fixes` ended 1e-8 off where plain `fix` was exact).
    trials = _Trials({(20,): rounded, (30,): exact})
    picked = select_verified(before, [fallback, preferred], trials, (), command=["x"], tolerance=within)
    assert picked.kept == [fallback] and trials.asked == [(20,), (30,)]
    ((dropped, why),) = picked.dropped
    assert dropped is preferred and why[0].startswith("kept instead: RF003 at prog.py:30"), why
    assert picked.last is exact and not picked.verification.rounded


def test_apply_makes_a_fallback_only_in_place_of_its_preferred_fix():
    preferred, fallback = _alternatives()
    assert select_fixes([preferred, fallback], unsafe_fixes=True) == [preferred]
    assert select_fixes([preferred, fallback], unsafe_fixes=False) == []
    preferred.safety = Safety.NONE  # the tensor lr cannot help (betas change beside the lr)
    assert select_fixes([preferred, fallback], unsafe_fixes=True) == [fallback]


def test_the_unsafe_fixes_hint_is_not_given_where_fix_ran_with_unsafe_fixes():
    """A dropped unproven fix whose rule allows rounding: plain `fix` says `--unsafe-fixes` would
    keep it within that tolerance; `fix --unsafe-fixes`, which tried it so, does not."""
    from recompile_fix.verify.fixpoint import FixPoint, Round
    from recompile_fix.verify.render import render_fix

    before = _run([_frame("fn", 10, range(2))], ONES)
    mark = _fix(safety=Safety.UNSAFE, unsafe_because=UNPROVEN, tolerance={"why": "rounds"})
    dropped = [(mark, ["outputs differ: fn (prog.py:10): call 1, tensor 1: max abs diff 1e-4"])]
    hint = "`recompile-fix fix --unsafe-fixes` keeps it"
    for unsafe, shown in ((False, True), (True, False)):
        result = FixPoint(["x"], before, before, [Round(1, [mark], [], dropped)], converged=True, unsafe_fixes=unsafe)
        assert (hint in render_fix(result)) is shown


def test_a_fix_whose_edit_a_kept_fix_makes_is_kept_with_it_without_a_run():
    """A trial: two scalars of one compiled function each asked for `dynamic=True` at its compile
    call; one at a time, the second's run was the first's again, and `fix` dropped it as "changes
    nothing" though its edit was kept. A fix that adds no edit to the kept ones rides on their run."""
    before = _run([_frame("fn", 10, range(3)), _frame("gn", 40, range(3), source="y")], ONES)
    crashed = _run([], exit_code=1)
    fixed = _run([_frame("fn", 10, range(1)), _frame("gn", 40, range(3), source="y")], ONES)
    unproven = {"safety": Safety.UNSAFE, "unsafe_because": UNPROVEN}
    offset, length = _fix(line=20, **unproven), _fix(line=21, **unproven)
    wrong = _fix(line=50, frame="gn (prog.py:40)", source="y", **unproven)
    trials = _Trials({(20, 21, 50): crashed, (20,): fixed})
    same_edit = {(20, 21)}

    def adds_no_edit(kept, fix):
        return (kept[-1].location.line, fix.location.line) in same_edit

    heard: list[int] = []
    picked = select_verified(
        before,
        [offset, length, wrong],
        trials,
        (),
        command=["x"],
        tolerance=Tolerance(),
        adds_no_edit=adds_no_edit,
        expect=heard.append,
    )
    assert picked.kept == [offset, length] and [f for f, _ in picked.dropped] == [wrong]
    assert trials.asked == [(20, 21, 50), (20,), (20, 21, 50)]  # no run of (20, 21)
    assert picked.verification is not None and picked.verification.verified
    assert -1 in heard  # the progress line's "run i/n" counts one run fewer


def test_the_progress_line_counts_a_run_not_made_out():
    from recompile_fix.verify.prove import Trials

    trials = Trials(["x"], None, None, (), Path("."), backend=None, calls=1, progress=None)
    trials.expect(3)
    assert trials.label("a") == "run 1/3: a"
    trials.expect(-1)  # a fix kept without a run of its own
    assert [trials.label("b"), trials.label("c")] == ["run 2/2: b", "run 3/3: c"]


def test_plain_fix_holds_a_kernels_rounding_to_assert_close_and_an_arithmetic_change_to_the_bits():
    """A trial's tiny BERT under inductor: the mark of a padded batch's length made another kernel,
    3.7e-9 off, and plain `fix` dropped it (bits wanted), ending where it began. A mark changes no
    arithmetic of the program, only which kernel inductor runs, as compiling itself does: plain
    `fix` keeps it within assert_close, says so, and keeps the bits for a 0-d tensor that
    replaces a Python number (its arithmetic is the program's own)."""
    before = _run([_frame("fn", 10, range(3))], ONES)
    rounded = _run([_frame("fn", 10, range(1))], {"fn": [torch.ones(2) + 1e-7]})
    kernel = {"why": "inductor compiles another kernel for the dynamic size", "kernel": True}
    mark = _fix(line=20, safety=Safety.UNSAFE, unsafe_because=UNPROVEN, tolerance=kernel)
    wrap = _fix(rule="RF002", line=20, safety=Safety.UNSAFE, unsafe_because=UNPROVEN, tolerance={"why": "rounds"})
    exactly = Tolerance(unproven_exact=True)
    assert not proof_tolerance([mark], exactly)[0].exact  # assert_close's defaults
    assert proof_tolerance([wrap], exactly)[0].exact
    picked = select_verified(before, [mark], _Trials({(20,): rounded}), (), command=["x"], tolerance=exactly)
    assert picked.kept == [mark] and picked.verification.rounded
    picked = select_verified(before, [wrap], _Trials({(20,): rounded}), (), command=["x"], tolerance=exactly)
    assert picked.kept == [] and [f for f, _ in picked.dropped] == [wrap]


def _slow_frame(name, line, count, seconds):
    frame = _frame(name, line, range(count))
    for compile_ in frame.compiles:
        compile_.seconds = {"dynamo": seconds}  # what the recorder keeps: the whole compile
    return frame


def test_an_unproven_fix_that_lengthens_compiling_is_a_trade_off_not_a_fix():
    """A trial under inductor: `fix` kept `dynamic=True`, two 0-d tensors and a mark together, 3 ->
    2 compiles, and compiling went from 15.6 s to 31.3 s. Fewer, slower compiles are a speed
    trade-off: an unproven fix must not lengthen compiling by half and 2 s; within that (a busy
    machine's stretch) it passes."""
    unproven = _fix(safety=Safety.UNSAFE, unsafe_because=UNPROVEN)
    before = _run([_slow_frame("fn", 10, 3, 5.2)], ONES)
    slower = _run([_slow_frame("fn", 10, 2, 15.6)], ONES)
    v = compare_runs(before, slower, command=["x"], fixes=[unproven], tolerance=Tolerance())
    assert v.regressions == [
        "an unproven fix must not lengthen compiling (RF001 at prog.py:20): compile seconds 15.60 -> 31.20"
    ]
    stretched = _run([_slow_frame("fn", 10, 2, 9.0)], ONES)  # 15.6 -> 18.0 s: within the margin
    assert compare_runs(before, stretched, command=["x"], fixes=[unproven], tolerance=Tolerance()).verified
    assert compare_runs(before, slower, command=["x"], fixes=[_fix()], tolerance=Tolerance()).verified  # proven


def test_a_long_reason_is_cut_after_a_clause_or_between_words_never_inside_one():
    """`fix`'s "stays:" lines are one line each; a trial's ended "marked fro…"."""
    from recompile_fix.verify.fixpoint import _short

    note = (
        "`x` dim 2 gets no mark: compile 0/1 traced it dynamic, and that graph's own guards reject the size 8 "
        "an earlier call took (`(x.size()[2]//2) != 4`): marked from the first call, a graph per side of "
        "that guard may still be fewer compiles than now"
    )
    assert _short(note).endswith("(`(x.size()[2]//2) != 4`)\u2026")
    words = " ".join(["word"] * 60)
    assert _short(words).endswith("word\u2026") and len(_short(words)) <= 160
    assert _short("short note") == "short note"
