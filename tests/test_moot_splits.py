"""A graph break another rule's fix makes moot (findings/plan.py): dropped, with the note."""

from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.plan import _drop_splits_another_fix_makes_moot
from recompile_fix.profile.model import Location
from recompile_fix.rules import ALL_RULES


def test_a_graph_break_is_moot_where_another_fix_covers_the_same_recompiles_even_unsafe():
    """RF005's graph break trades a frame for a prefix compiled once; RF002's 0-d tensor at the
    call covers the same recompiles (`guidance_scale`). With `--unsafe-fixes` both were written
    and the break only added a frame (a trial: 3 -> 4 compiles): the break is dropped, the note
    naming the other fix, whether that one is safe or not."""

    cover = [{"frame": "cfg_step (train.py:30)", "sources": ["guidance_scale"]}]
    for safety in (Safety.SAFE, Safety.UNSAFE):
        tensor = Finding("RF002", "train.py", Location("train.py", 50), "tensor", safety, covers=list(cover))
        split = Finding("RF005", "train.py", Location("train.py", 33), "break", Safety.UNSAFE, covers=list(cover))
        _drop_splits_another_fix_makes_moot([tensor, split], ALL_RULES)
        assert split.safety is Safety.NONE and tensor.safety is safety
        assert split.notes[0].startswith(f"RF002's {safety.value} fix at train.py:50 makes the frame compile once")
    apart = Finding(
        "RF005",
        "train.py",
        Location("train.py", 33),
        "break",
        Safety.UNSAFE,
        covers=[{**cover[0], "sources": ["other"]}],
    )
    none = Finding("RF002", "train.py", Location("train.py", 50), "tensor", Safety.NONE, covers=list(cover))
    _drop_splits_another_fix_makes_moot([none, apart], ALL_RULES)
    assert apart.safety is Safety.UNSAFE


def test_the_plan_leaves_a_moot_graph_break_out():
    """Trials: "RF005 [no fix] ... RF002's safe fix makes the frame compile once" under nearly
    every 0-d tensor fix. The plan lists the fix alone; a break beside a fix of other recompiles,
    or beside no fix, stays (and a [no fix] it covers is left out)."""
    from recompile_fix.findings.plan import _without_moot_findings

    cover = [{"frame": "nt_xent_loss (prog.py:20)", "sources": ["temperature"]}]
    tensor = Finding("RF002", "prog.py", Location("prog.py", 49), "tensor", Safety.SAFE, covers=list(cover))
    split = Finding("RF005", "prog.py", Location("prog.py", 24), "break", Safety.UNSAFE, covers=list(cover))
    assert _without_moot_findings([tensor, split], ALL_RULES) == [tensor]
    apart = Finding(
        "RF005", "prog.py", Location("prog.py", 24), "break", Safety.UNSAFE, covers=[{**cover[0], "sources": ["tau"]}]
    )
    assert _without_moot_findings([tensor, apart], ALL_RULES) == [tensor, apart]
    none = Finding("RF002", "prog.py", Location("prog.py", 49), "tensor", Safety.NONE, covers=list(cover))
    alone = Finding("RF005", "prog.py", Location("prog.py", 24), "break", Safety.UNSAFE, covers=list(cover))
    assert _without_moot_findings([none, alone], ALL_RULES) == [alone]  # the break is the fix there
    assert alone.safety is Safety.UNSAFE


def test_a_no_fix_another_rules_fix_covers_is_left_out():
    """RF014 says "it stays a float" for a dropout's `p` where RF008 builds the dropout as
    ScheduledDropout (golden/RF008/dropout_beside_drop_path): only the fix is listed. A [no fix]
    that covers a source no other rule fixes stays."""
    from recompile_fix.findings.plan import _another_rule_fixes

    cover = {"frame": "forward (m.py:3)", "sources": ["self._modules['drop'].p"]}
    fix = Finding("RF008", "m.py", Location("m.py", 9), "fix", Safety.UNSAFE, covers=[dict(cover)])
    stays = Finding("RF014", "m.py", Location("m.py", 3), "stays", Safety.NONE, covers=[dict(cover)])
    assert _another_rule_fixes(stays, [fix, stays])
    wider = Finding("RF014", "m.py", Location("m.py", 3), "stays", Safety.NONE, covers=[{**cover, "sources": ["q"]}])
    assert not _another_rule_fixes(wider, [fix, wider])
    same_rule = Finding("RF008", "m.py", Location("m.py", 3), "stays", Safety.NONE, covers=[dict(cover)])
    assert not _another_rule_fixes(same_rule, [fix, same_rule])
    fix.safety = Safety.NONE
    assert not _another_rule_fixes(stays, [fix, stays])
