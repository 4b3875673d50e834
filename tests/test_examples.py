"""The bundled examples: `profile` + `apply` on the growing-shape and ragged-last-batch programs
compiles their frame once (from 2), with equal outputs; and `apply --diff` on examples/ is the
reviewed diff kept in golden/examples.diff."""

import pytest

from conftest import ROOT, profiled_examples, run_cli
from equivalence import assert_same_outputs, run_recorded

DIFF = ROOT / "golden" / "examples.diff"


@pytest.fixture(scope="module")
def fixed_examples(tmp_path_factory):
    work = profiled_examples(tmp_path_factory.mktemp("ex"))
    diff = run_cli("apply", "examples/", "--diff", cwd=work, check=1).stdout
    run_cli("apply", "examples/", cwd=work, check=0)
    return work, diff


@pytest.mark.torch_lane
def test_examples_diff_is_the_reviewed_one(fixed_examples, request):
    _, diff = fixed_examples
    if request.config.getoption("--update-golden"):
        DIFF.write_text(diff)
    assert diff == DIFF.read_text()


@pytest.mark.torch_lane
@pytest.mark.parametrize("program, frame", [("growing_shape.py", "forward"), ("ragged_batch.py", "forward")])
def test_example_compiles_once_after_apply(fixed_examples, program, frame, tmp_path):
    work, _ = fixed_examples
    before = run_recorded(ROOT / "examples" / program, tmp_path)
    after = run_recorded(work / "examples" / program, tmp_path)
    assert before["compiles"][frame] >= 2
    assert after["compiles"][frame] == 1
    assert_same_outputs(before, after)


def test_report_accounts_for_every_recompile_of_the_examples(fixed_examples):
    """`report` on examples/run_all.py: each recompile has a fix, a finding that says why it has
    none, or is expected (train_eval.py's grad-mode switch), and the counts add up."""
    import json
    import re

    work, _ = fixed_examples
    profile = work / ".recompile-fix" / "profile.json"
    text = run_cli("report", str(profile), cwd=ROOT, check=0).stdout
    data = json.loads(run_cli("report", str(profile), "--json", cwd=ROOT, check=0).stdout)
    counted = re.search(
        r"Every recompile accounted for: (\d+) recompiles: (\d+) with a proposed fix, (\d+) with no fix \(why given\), "
        r"(\d+) expected",
        text,
    )
    assert counted, text
    total, fix, no_fix, expected = map(int, counted.groups())
    assert total == sum(f["recompiles"] for f in data["frames"]) == data["recompiles"]["recompiles"]
    assert fix + no_fix + expected == total
    assert fix > 0 and no_fix > 0 and expected > 0
    assert "[expected] forward (examples/train_eval.py:" in text and "grad mode switched" in text
