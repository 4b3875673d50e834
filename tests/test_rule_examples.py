"""Every rule's examples run as tests (as Fixit's VALID/INVALID examples do). An example is an
excerpt of one of the rule's golden cases: the rule, alone, runs on the Profile recorded for that
case, and in the case's program ``before`` must become ``after`` (or, for ``after=None``, the
file must stay as it is). test_golden then checks `apply` writes the case's program.out.py."""

import shutil

import pytest

from golden_cases import GOLDEN, load_case
from recompile_fix.pipeline.fix import run_apply
from recompile_fix.profile.model import Profile
from recompile_fix.rules import ALL_RULES

EXAMPLES = [(rule, example) for rule in ALL_RULES for example in rule.examples]


def _id(item) -> str:
    rule, example = item
    return f"{rule.id}:{example.golden}" + ("" if example.after is not None else ":left-alone")


def test_every_rule_has_an_example_with_a_fix():
    fixing = {r.id for r in ALL_RULES if not r.finding_only}
    assert {rule.id for rule, example in EXAMPLES if example.after is not None} == fixing


def test_a_finding_only_rule_shows_what_it_reports_and_never_fixes():
    for rule in (r for r in ALL_RULES if r.finding_only):
        assert rule.examples and all(example.after is None for example in rule.examples), rule.id


@pytest.mark.parametrize("item", EXAMPLES, ids=_id)
def test_example_is_what_the_rule_does_to_its_golden_case(item, tmp_path):
    rule, example = item
    case = load_case(GOLDEN / example.golden)
    assert case.rule == rule.id, f"{example.golden} is not one of {rule.id}'s cases"
    program = (case.path / "program.in.py").read_text(encoding="utf-8")
    assert program.count(example.before) == 1, f"`before` is not (once) in golden/{example.golden}/program.in.py"
    for extra in case.path.glob("*.py"):
        if extra.name not in ("program.in.py", "program.out.py"):
            shutil.copy(extra, tmp_path / extra.name)
    (tmp_path / "program.py").write_text(program, encoding="utf-8")

    result = run_apply(
        [str(tmp_path)],
        Profile.load(case.path / "profile.json"),
        (rule,),
        root=str(tmp_path),
        unsafe_fixes=case.unsafe_fixes,
        write=False,
        jobs=1,
        use_cache=False,
    )
    assert not result.errors, result.errors
    rewritten = {r.path: r.after for r in result.rewrites}.get("program.py", program)
    if example.after is None:
        assert rewritten == program, "the rule edits a case its example says it leaves alone"
    else:
        assert rewritten == program.replace(example.before, example.after)


def test_rules_command_prints_the_examples(cli):
    out = cli("rules", "RF001", check=0).stdout
    assert "golden/RF001/seed_shape_change" in out
    assert "-fn(torch.ones(3))\n" in out and "+torch._dynamo.mark_dynamic(x, 0)\n" in out
