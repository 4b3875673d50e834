"""recompile_fix.findings.alone: a safe number fix that changes nothing alone, because a tensor's
size changed at every compile where the number did and no safe fix marks it, is unproven."""

from recompile_fix.findings.alone import unproven_where_sizes_change_too
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety
from recompile_fix.profile.model import Compile, Frame, Location, Profile


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
