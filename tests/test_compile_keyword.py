"""recompile_fix.edits.compile_keyword: one Finding per compile call where several would write
the same keyword there (a trial: three floats of a loss, three `dynamic=True` at one call, each
run on its own by `fix`)."""

from recompile_fix.edits.compile_keyword import one_per_compile_call
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, stands_in_for
from recompile_fix.profile.model import Location


def _dynamic(name: str, *, fallback: bool = False, line: int = 9) -> Finding:
    return Finding(
        rule="RF002",
        file="prog.py",
        location=Location("prog.py", line),
        message=f"`{name}` of compiled `cls_loss` is a Python float that changes: compile `cls_loss` with `dynamic=True`",
        safety=Safety.UNSAFE,
        unsafe_because=UNPROVEN,
        fallback=fallback,
        covers=[{"frame": "cls_loss (prog.py:10)", "sources": [name]}],
        notes=[f"with `dynamic=True` torch traces `{name}` as a symbolic float from the first compile (as PGO)"],
        params={"compile_call": [9, 1, 9, 30], "keyword": "dynamic", "dynamic": "add", "names": [name]},
    )


def test_the_same_keyword_at_one_call_is_one_finding_that_covers_them_all():
    smoothing, temperature, other = _dynamic("smoothing"), _dynamic("temperature"), _dynamic("gamma", line=30)
    other.params["compile_call"] = [30, 1, 30, 30]
    merged = one_per_compile_call([smoothing, temperature, other], "cls_loss")
    assert merged == [smoothing, other]
    assert smoothing.message == (
        "`smoothing` and `temperature` change between calls of compiled `cls_loss`: compile `cls_loss` with `dynamic=True`"
    )
    assert [c["sources"] for c in smoothing.covers] == [["smoothing"], ["temperature"]]
    assert smoothing.notes == [
        "with `dynamic=True` torch traces `smoothing` and `temperature` from the first compile (as PGO)"
    ]


def test_a_fallback_merges_with_fallbacks_and_stands_in_for_each_fix_it_replaces():
    first, second = _dynamic("alpha", fallback=True), _dynamic("temperature", fallback=True)
    candidate = _dynamic("smoothing")
    assert one_per_compile_call([first, candidate, second], "loss") == [first, candidate]
    for name in ("alpha", "temperature"):
        wrap = Finding(
            rule="RF002",
            file="prog.py",
            location=Location("prog.py", 20),
            message="wrap",
            safety=Safety.UNSAFE,
            covers=[{"frame": "cls_loss (prog.py:10)", "sources": [name]}],
        )
        assert stands_in_for(first, wrap)
    assert not stands_in_for(candidate, first)
