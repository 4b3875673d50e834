"""`fix` keeps only what a run proves, and ends honestly (issue 30, causes 3 and 9), measured
on programs.

A fix that changes nothing is never kept:

* a size formatted into a message (tests/programs/honest/size_in_message.py): automatic dynamic
  fails to generalise it (8 compiles); a `maybe_mark_dynamic` before the call (a test-only rule
  plants it, as RF001 once did) changes nothing: `fix` drops it ("changes nothing on this
  program") and writes nothing; with the real rules, `fix` writes no edit or one that removes
  compiles, and its outputs stay equal;
* a program already at its minimum (at_minimum.py): a planted fix changes nothing and is dropped;
  the real rules find nothing to do and `fix` says so.

Unproven fixes are proven by running, trade-offs named:

* RF008/early_dropout's ScheduledDropout (unproven: bit-identical only on some backends) is
  tried by safe `fix`, kept as verified on this program, and reaches what `apply
  --unsafe-fixes` reaches (8 -> 1 compiles, outputs equal): bench/fix_sweep.py's measure, on a
  sample of its sweep;
* trade_off.py: RF005's graph-break shield is a trade-off: safe `fix` does not try it, and
  instead of "Nothing to fix" names it with the recompiles it is about.
"""

import importlib.util
import shutil
import sys

import pytest

from conftest import PROGRAMS, ROOT, run_cli
from equivalence import run_recorded, total_compiles
from recompile_fix.analysis.project import Project
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import Location, Profile, save_profile
from recompile_fix.rules import ALL_RULES
from recompile_fix.verify.fixpoint import fix_to_fixed_point
from recompile_fix.verify.judge import NO_OP
from recompile_fix.verify.prove import Trials, compile_totals, plan_fixes
from recompile_fix.verify.render import render_fix
from recompile_fix.verify.tree import Checkout

pytestmark = pytest.mark.slow

HONEST = PROGRAMS / "honest"


class Plant(Rule):
    """Test only: insert ``statement`` before the line holding ``needle``, as a safe fix."""

    id = "RF997"
    name = "plant"

    def __init__(self, file: str, needle: str, statement: str):
        self.file, self.needle, self.statement = file, needle, statement

    def plan(self, profile, project):
        source = project.source(self.file)
        if source is None or self.statement in source.text:
            return []
        start = source.text.index(self.needle)
        line_start = source.text.rfind("\n", 0, start) + 1
        line = source.text[:start].count("\n") + 1
        return [
            Finding(
                rule=self.id,
                file=self.file,
                location=Location(self.file, line, col=start - line_start),
                message="plant",
                safety=Safety.SAFE,
                params={"at": line_start, "indent": " " * (start - line_start)},
            )
        ]

    def fix(self, finding, source, torch_name):
        at, indent = finding.params["at"], finding.params["indent"]
        return [Edit(finding.file, at, at, f"{indent}{self.statement}\n", self.id)]


def _stage(name: str, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(HONEST / name, work / name)
    return work


def test_a_maybe_mark_dynamic_on_a_size_formatted_into_a_message_is_dropped(tmp_path):
    work = _stage("size_in_message.py", tmp_path)
    text = (work / "size_in_message.py").read_text()
    plant = Plant("size_in_message.py", "outputs.append(norm(x))", "torch._dynamo.maybe_mark_dynamic(x, 0)")
    result = fix_to_fixed_point(["python", "size_in_message.py"], (plant,), root=work, backend="eager")
    assert result.kept == [] and result.rewrites == []
    ((dropped, why),) = result.dropped
    assert dropped.rule == "RF997" and why == [f"{NO_OP}: compiles 8 -> 8, the same recompile reasons"]
    assert (work / "size_in_message.py").read_text() == text
    assert result.runs == 2  # the program as it is, and the one trial: nothing more
    out = render_fix(result)
    assert f"  dropped  size_in_message.py:20:9: RF997 [*] plant\n           - {NO_OP}: compiles 8 -> 8" in out
    # The Profile `fix` writes marks what did not verify as done (applied: the hash it profiled),
    # and every command reads it: `apply --check` said "damaged Profile" (exit 2) before.
    save_profile(result.profile, work / "fixed.json")
    check = run_cli("apply", ".", "--check", "--profile", str(work / "fixed.json"), cwd=work)
    assert check.returncode == 0 and "damaged" not in check.stderr, check.stderr


def test_the_real_rules_on_a_size_formatted_into_a_message_write_no_useless_edit(tmp_path):
    work = _stage("size_in_message.py", tmp_path)
    result = fix_to_fixed_point(["python", "size_in_message.py"], ALL_RULES, root=work, backend="eager")
    before = total_compiles(run_recorded(HONEST / "size_in_message.py", tmp_path))  # torch's own count
    assert before == sum(f.compile_count for f in result.first.profile.frames) == 8
    assert not any(why and why[0].startswith(NO_OP) and f.safety is not Safety.SAFE for f, why in result.dropped)
    if result.rewrites:  # an edit is kept only when it removes compiles, outputs equal
        after = total_compiles(run_recorded(work / "size_in_message.py", tmp_path))
        assert after < before
        assert result.verification is not None and result.verification.verified
    else:
        assert sum(f.compile_count for f in result.last.profile.frames) == before


def test_a_program_at_its_minimum_keeps_no_fix(tmp_path):
    work = _stage("at_minimum.py", tmp_path)
    text = (work / "at_minimum.py").read_text()
    plant = Plant("at_minimum.py", "loss = step(x, w).sum()", "torch._dynamo.mark_dynamic(x, 0)")
    result = fix_to_fixed_point(["python", "at_minimum.py"], (plant,), root=work, backend="eager")
    assert result.kept == [] and (work / "at_minimum.py").read_text() == text
    ((_, why),) = result.dropped
    assert why[0].startswith(NO_OP), why
    real = fix_to_fixed_point(["python", "at_minimum.py"], ALL_RULES, root=work, backend="eager", write=False)
    assert real.rounds == [] and real.runs == 1 and real.not_tried == []
    assert "Nothing to fix." in render_fix(real)


def test_an_unproven_fix_that_rounds_is_not_kept_and_its_bit_exact_fallback_is(tmp_path):
    """A new user's trial: plain `fix` kept an unproven wrap whose outputs were only close (6e-8
    off), relabelled `[*]` and "verified". Without --unsafe-fixes an unproven fix must keep the
    outputs bit for bit: the wrap is dropped, and RF002's other fix of the same recompiles,
    `dynamic=True` where `mix` is compiled (the float stays a Python float), is kept: 2 -> 1 bit
    for bit, as PGO's second run. With --unsafe-fixes the bit-exact one is kept too."""
    work = _stage("rounded_weight.py", tmp_path)
    text = (work / "rounded_weight.py").read_text()
    plain = fix_to_fixed_point(["python", "rounded_weight.py"], ALL_RULES, root=work, backend="eager", write=False)
    ((dropped, why),) = [d for r in plain.rounds for d in r.dropped]
    assert dropped.rule == "RF002" and dropped.unproven and not dropped.fallback
    assert why[0].startswith("outputs differ"), why
    (kept,) = plain.kept
    assert kept.fallback and kept.params["keyword"] == "dynamic"
    assert sum(f.compile_count for f in plain.last.profile.frames) == 1
    shown = render_fix(plain)
    assert "dropped  rounded_weight.py:18:18: RF002 [unsafe fix]" in shown and "with `dynamic=True`" in shown
    assert "--unsafe-fixes` keeps it" not in shown  # it would not: the bit-exact fallback is kept there too
    unsafe = fix_to_fixed_point(
        ["python", "rounded_weight.py"], ALL_RULES, root=work, backend="eager", write=False, unsafe_fixes=True
    )
    (kept,) = unsafe.kept
    assert kept.fallback and (work / "rounded_weight.py").read_text() == text
    assert "fixes the same recompiles bit for bit" in render_fix(unsafe)


def _sweep():
    spec = importlib.util.spec_from_file_location("fix_sweep", ROOT / "bench" / "fix_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "case, before",
    # four_dropouts: torch names one of four dropouts one schedule sets; all four are converted
    # (issue 30, cause 7), so safe `fix` reaches the hand fix's single compile.
    [("early_dropout", 8), ("four_dropouts", 6)],
)
def test_safe_fix_proves_an_unproven_fix_and_reaches_the_unsafe_count(tmp_path, case, before):
    sweep = _sweep()
    row = sweep.measure(ROOT / "golden" / "RF008" / case, tmp_path)
    assert row.ok, row.failures
    assert (row.before, row.fix_after, row.unsafe_after, row.unsafe_outputs) == (before, 1, 1, "equal")
    assert row.kept == [] and [p.split("@")[0] for p in row.proven] == ["RF008"]
    assert f"RF008/{case}" in sweep.table([row]) and "1 unproven fixes verified" in sweep.table([row])


def test_safe_fix_names_the_trade_off_it_did_not_try(tmp_path):
    work = _stage("trade_off.py", tmp_path)
    result = fix_to_fixed_point(["python", "trade_off.py"], ALL_RULES, root=work, backend="eager", write=False)
    assert result.rounds == [] and result.runs == 1
    ((trade, about),) = result.not_tried
    assert (trade.rule, about, trade.unproven) == ("RF005", 3, False)
    out = render_fix(result)
    assert "Nothing to fix." not in out and "No safe fix to try." in out
    assert "Not tried: trade-off fixes" in out and "RF005 [unsafe fix] `fn` recompiles for each value of `c`" in out
    assert "would address: about 3 recompile(s) of the last run; trade-off: " in out
    assert out.count("stays: a trade-off fix (RF005, with --unsafe-fixes)") == 3


def test_fixes_that_only_move_the_recompile_to_another_guard_are_never_written(tmp_path):
    """A new user's beam search: RF001's [*] marks took the size guard away and uncovered
    `num_beams`'s (2 -> 2 compiles), and `fix` kept them. Now the run's record shows the int
    `num_beams` carrying the size at every compile: RF001 offers no mark at all ([no fix], the
    int named). RF002's `dynamic_sources` for the int (a `topk` k: symbolic) is unproven, since
    `tokens`'s size changes with it unmarked: `fix` tries it, sees 2 -> 2, and writes nothing."""
    work = _stage("hidden_int.py", tmp_path)
    text = (work / "hidden_int.py").read_text()
    result = fix_to_fixed_point(["python", "hidden_int.py"], ALL_RULES, root=work, backend="eager")
    assert result.kept == [] and (work / "hidden_int.py").read_text() == text
    assert [f.rule for f, _ in result.dropped] in ([], ["RF002"]), result.dropped
    assert all("changes nothing on this program" in " ".join(why) for _, why in result.dropped), result.dropped
    out = render_fix(result)
    assert "`num_beams`, an int argument, carries `tokens` dim 0's size" in out or "num_beams" in out, out
    assert result.profile is not None
    save_profile(result.profile, work / "fixed.json")
    report = run_cli("report", "fixed.json", "--output-format", "full", cwd=work, check=0).stdout
    if "carries `tokens` dim 0's size" in report:  # the size to pass is the one that changed (it said `x.shape[1]`)
        assert "(`tokens.shape[0]`, or -1 in a view)" in report, report


def test_the_weights_training_leaves_are_compared_not_only_the_first_outputs(tmp_path):
    """A new user's trial: `fix` kept RF014's tensor `gamma` as `[*]` "verified": the losses the
    compiled calls returned were bit for bit, the trained weights were not (1e-9 off). The
    parameters each optimizer holds at exit are compared as one more output."""
    work = _stage("focal_gamma.py", tmp_path)
    plain = fix_to_fixed_point(["python", "focal_gamma.py"], ALL_RULES, root=work, backend="eager", write=False)
    ((dropped, why),) = [d for r in plain.rounds for d in r.dropped]
    assert dropped.rule == "RF014" and plain.kept == []
    assert why[0].startswith("outputs differ: SGD parameters at exit"), why


def test_a_trade_off_that_undoes_another_fixs_gain_is_dropped_and_the_gain_kept(tmp_path):
    """A new user's trial: with --unsafe-fixes, RF005's graph break and RF002's wrap together
    compiled 4 -> 4 (reasons changed), so both were kept, then both dropped at the end, losing
    the `[*]` wrap plain `fix` keeps (4 -> 3). A set that removes no compile is tried one at a
    time, trade-offs last, and a fix after which the program compiles more in all is worse."""
    work = _stage("smoothing_accum.py", tmp_path)
    unsafe = fix_to_fixed_point(
        ["python", "smoothing_accum.py"], ALL_RULES, root=work, backend="eager", write=False, unsafe_fixes=True
    )
    assert [f.rule for f in unsafe.kept] == ["RF002"]
    dropped = {f.rule: why for r in unsafe.rounds for f, why in r.dropped}
    assert dropped["RF005"][0].startswith("makes things worse: the program compiles 3 -> 4 times"), dropped
    assert len([f for r in unsafe.rounds for f, _ in r.dropped if f.rule == "RF005"]) == 1  # not tried again
    # `smoothing` fills cross_entropy's number slot: its `dynamic=True` candidate changes nothing here
    assert dropped["RF002"][0].startswith("changes nothing on this program"), dropped


def test_the_weights_of_an_optimizer_built_in_main_are_compared_too(tmp_path):
    """A new user's trial: with the optimizer built and dropped inside `main()`, nothing was left
    at exit to compare, so every unproven fix was dropped with "no compiled callable returned a
    tensor". The recorder holds the param groups of the optimizers that stepped until exit."""
    work = _stage("optimizer_in_main.py", tmp_path)
    plain = fix_to_fixed_point(["python", "optimizer_in_main.py"], ALL_RULES, root=work, backend="eager", write=False)
    # `dynamic=True` at `torch.compile(optimizer.step)` (safe: only the step is compiled)
    assert [f.rule for f in plain.kept] == ["RF003"], render_fix(plain)
    verification = plain.verification
    assert verification is not None
    (weights,) = [o for o in verification.outputs if o.label.startswith("AdamW parameters at exit")]
    assert weights.compared > 0 and weights.same and not weights.max_abs_diff, render_fix(plain)


def test_runs_compared_use_deterministic_algorithms_so_an_inductor_mark_keeps_its_bits(tmp_path):
    """inductor's CPU backward of an embedding accumulates with atomic adds: two runs of the same
    training program differed (6e-8), so plain `fix` dropped the ragged batch's mark as "outputs
    differ", on examples/train_generate.py too (keeping nothing after 4 runs). Runs whose outputs
    are compared now use torch's deterministic algorithms: the mark is kept, bit for bit, in two
    runs (the profile and the one trial), 2 -> 1 compiles."""
    name = "inductor_embedding_train.py"
    work = _stage(name, tmp_path)
    result = fix_to_fixed_point(["python", name], ALL_RULES, root=work)
    assert [f.rule for f in result.kept] == ["RF001"] and result.dropped == [], render_fix(result)
    assert result.runs == 2
    verification = result.verification
    assert verification is not None and verification.outputs
    assert all(o.same and not o.max_abs_diff for o in verification.outputs), render_fix(result)
    assert "torch._dynamo.mark_dynamic(x, 0)" in (work / name).read_text()
    assert (compile_totals(result.first)[0], compile_totals(result.last)[0]) == (2, 1)


def test_a_fix_whose_edit_is_another_kept_fixs_needs_no_run_of_its_own(tmp_path):
    """RF002 (an int used as a size) and RF015 (a global float) both write `dynamic=True` at one
    decorator: the second adds no edit to the first, so `fix` keeps it with the first without a
    run (one at a time it was dropped as "changes nothing"); a fix elsewhere adds one."""
    name = "two_rules_one_edit.py"
    work = _stage(name, tmp_path)
    run_cli("profile", "--", "python", name, cwd=work, check=0)
    profile = Profile.load(work / ".recompile-fix" / "profile.json")
    fixes, errors = plan_fixes(work, profile, ALL_RULES, unsafe_fixes=True)
    assert not errors
    by_rule = {f.rule: f for f in fixes}
    assert {"RF002", "RF015"} <= by_rule.keys(), [f.rule for f in fixes]
    plant = Plant(name, "outs.append", "torch._dynamo.mark_dynamic(x, 0)")
    user = Checkout.of(work, profile)
    (planted,) = plant.plan(profile, Project(work, expected_hashes=profile.sources))
    rules = (*ALL_RULES, plant)
    trials = Trials(["python", name], user, user, rules, tmp_path / "scratch", backend=None, calls=8, progress=None)
    assert trials.adds_no_edit([by_rule["RF002"]], by_rule["RF015"])
    assert trials.adds_no_edit([by_rule["RF015"]], by_rule["RF002"])
    assert not trials.adds_no_edit([by_rule["RF002"]], planted)


def test_outputs_that_are_nan_in_both_runs_prove_no_fix(tmp_path):
    """A new user's trial: a compiled AdamW under a warm-up from lr 0 returned NaN before and
    after, and `fix` called the outputs equal. NaN everywhere matches NaN: no evidence, said so,
    and an unproven fix is not kept on it."""
    work = _stage("nan_outputs.py", tmp_path)
    text = (work / "nan_outputs.py").read_text()
    result = fix_to_fixed_point(["python", "nan_outputs.py"], ALL_RULES, root=work, backend="eager")
    ((dropped, why),) = [d for r in result.rounds for d in r.dropped]
    assert dropped.rule == "RF015" and result.kept == [] and (work / "nan_outputs.py").read_text() == text
    assert any("every tensor compared (8: what compiled code returned and what the program kept)" in w for w in why)
    shown = render_fix(result)
    assert "NaN everywhere in both runs" in shown, shown


def test_what_the_program_keeps_outside_compiled_code_is_compared_too(tmp_path):
    """A new user's trial (manifold mixup): a 0-d float64 tensor for a float the training loop
    also weighs its losses with kept the compiled outputs and the weights bit for bit, so `fix`
    kept it, and the losses the loop printed turned float64. The tensors the program's module
    keeps at exit are compared too: the tensor is dropped there, `dynamic=True` kept, the
    program's numbers unchanged."""
    work = _stage("loss_beside_attribute.py", tmp_path)
    result = fix_to_fixed_point(["python", "loss_beside_attribute.py"], ALL_RULES, root=work, backend="eager")
    dropped = [(d, why) for r in result.rounds for d, why in r.dropped]
    assert [d.rule for d, _ in dropped] == ["RF014"] and "0-d tensor" in dropped[0][0].message
    assert any("outputs differ: `losses` at exit" in w and "float32 -> float64" in w for w in dropped[0][1])
    assert [f.rule for f in result.kept] == ["RF014"] and "dynamic=True" in result.kept[0].message
    assert "dynamic=True" in (work / "loss_beside_attribute.py").read_text()
