"""recompile_fix.findings.alone: a safe fix that changes nothing alone is unproven: a number's,
because a tensor's size changed at every compile where the number did and no safe fix marks it;
any fix, where each recompile it is about also failed a guard no safe fix covers."""

from recompile_fix.findings.alone import unproven_where_other_guards_fail_too, unproven_where_sizes_change_too
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.profile.model import Compile, Frame, Location, Profile, Reason


def _profile(*, dynamic_first: bool = False, same_size_twice: bool = False) -> Profile:
    """A sampler's step: `cfg_scale` 4.0 then 2.0, the latent 8 then 12 wide with it."""
    sizes = [8, 8, 12] if same_size_twice else [8, 12]
    scales = [4.0, 2.0, 2.0] if same_size_twice else [4.0, 2.0]
    compiles = [
        Compile(
            id=f"0/{i}",
            inputs={"x": {"type": "Tensor", "shape": [2, size]}, "cfg_scale": {"type": "float", "value": scale}},
        )
        for i, (size, scale) in enumerate(zip(sizes, scales))
    ]
    if dynamic_first:
        compiles[0].dims = {"x": [{"dim": 1, "state": "dynamic"}]}
    frame = Frame(file="prog.py", first_line=3, name="step", compiles=compiles)
    return Profile(command=["python", "prog.py"], torch_version="2.13.0", python_version="3.11", frames=[frame])


def _fix(source: str, rule: str = "RF002") -> Finding:
    return Finding(
        rule=rule,
        file="prog.py",
        location=Location("prog.py", 9),
        message="wrap",
        safety=Safety.SAFE,
        covers=[{"frame": "step (prog.py:3)", "sources": [source]}],
    )


def test_a_number_that_changed_only_with_a_size_no_safe_fix_marks_is_unproven():
    wrap = _fix("cfg_scale")
    unproven_where_sizes_change_too([wrap], _profile())
    assert (wrap.safety, wrap.unsafe_because) == (Safety.UNSAFE, UNPROVEN)
    assert "the size of `x` changed at every compile where it did" in wrap.notes[-1]


def test_it_stays_safe_where_a_safe_mark_goes_with_it_or_the_size_was_dynamic_or_two_compiles_share_it():
    wrap, mark = _fix("cfg_scale"), _fix("x", rule="RF001")
    unproven_where_sizes_change_too([wrap, mark], _profile())  # `apply` makes both: the compiles merge
    assert wrap.safety is Safety.SAFE
    for profile in (_profile(dynamic_first=True), _profile(same_size_twice=True)):
        wrap = _fix("cfg_scale")
        unproven_where_sizes_change_too([wrap], profile)
        assert wrap.safety is Safety.SAFE, wrap.notes


def _schedule(*, p_changes_with_size: bool = True, limit_hit: bool = False) -> Profile:
    """Progressive resizing: `x` 16 -> 24 -> 32 wide, and a `Dropout.p` set per epoch (torch
    names the size, and the run shows the entry's `p == 0.0` failing too)."""
    p = "self._modules['dropout'].p"
    size = Reason("size_mismatch", "0/0: x size mismatch", entry="0/0", source="x", dim=2)
    attr = Reason("module_attribute", f"0/0: {p} == 0.0", entry="0/0", source=p, value=0.0)
    third = [Reason("module_attribute", f"0/1: {p} == 0.1", entry="0/1", source=p, value=0.1), size]
    compiles = [Compile(id="0/0"), Compile(id="0/1", reasons=[size]), Compile(id="0/2", reasons=third)]
    compiles[1].also_failed = [attr] if p_changes_with_size else None
    compiles[2].also_failed = [attr]
    compiles[2].limit_hit = limit_hit
    frame = Frame(file="prog.py", first_line=18, name="forward", compiles=compiles)
    return Profile(command=["python", "prog.py"], torch_version="2.13.0", python_version="3.11", frames=[frame])


def _mark() -> Finding:
    mark = _fix("x", rule="RF001")
    mark.covers = [{"frame": "forward (prog.py:18)", "sources": ["x"]}]
    return mark


def test_a_mark_whose_every_recompile_also_failed_an_unfixed_guard_is_unproven():
    mark = _mark()
    unproven_where_other_guards_fail_too([mark], _schedule())
    assert (mark.safety, mark.unsafe_because) == (Safety.UNSAFE, UNPROVEN)
    assert "also failed a guard on `self._modules['dropout'].p`, which no safe fix covers" in mark.notes[-1]


def test_it_stays_safe_where_one_recompile_merges_or_a_safe_fix_covers_the_other_guard_or_a_limit_was_hit():
    mark = _mark()
    unproven_where_other_guards_fail_too([mark], _schedule(p_changes_with_size=False))
    assert mark.safety is Safety.SAFE, mark.notes  # the first resize kept `p`: that compile merges
    mark, scheduled = _mark(), _fix("self._modules['dropout'].p", rule="RF008")
    scheduled.covers = [{"frame": "forward (prog.py:18)", "sources": ["self._modules['dropout'].p"]}]
    unproven_where_other_guards_fail_too([mark, scheduled], _schedule())
    assert (mark.safety, scheduled.safety) == (Safety.SAFE, Safety.SAFE)  # together they merge both
    mark = _mark()
    unproven_where_other_guards_fail_too([mark], _schedule(limit_hit=True))
    assert mark.safety is Safety.SAFE  # a limit hit is left to the run
