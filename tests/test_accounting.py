"""Every recompile accounted for (recompile_fix.findings.accounting): a fix, no fix (with why), or
expected; the counts add up to the Profile's recompiles. Hand-written Profiles with torch 2.13's
guard texts (measured: /work/staging/measure A.6), no torch run."""

import functools

import profiles
from recompile_fix.findings.accounting import EXPECTED, FIX, NO_FIX, account
from recompile_fix.findings.finding import Finding, Safety, cover
from recompile_fix.profile.model import Frame, Location

# The frames of these Profiles: ``forward`` of train.py, its n-th recompile failing on the guard
# texts of ``failures[n]`` (one per cache entry, newest first, as torch lists them).
frame_of = functools.partial(profiles.frame_of, name="forward", file="train.py", first_line=3)
profile_of = functools.partial(profiles.profile_of, command=("python", "train.py"))


def finding(frame: Frame, safety: Safety, sources=(), kinds=()) -> Finding:
    return Finding(
        rule="RF002",
        file=frame.file,
        location=Location(file=frame.file, line=9),
        message="`c` ...",
        safety=safety,
        notes=["why"],
        covers=[cover(frame, sources, kinds)],
    )


GRAD = "0/0: GLOBAL_STATE changed: grad_mode"
TRAINING = "0/0: self._modules['bn'].training == True  # if self.training:  # nn/modules/batchnorm.py:187 in forward"
INFERENCE = (
    "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, "
    "AutogradCPU), actual DispatchKeySet(CPU, BackendSelect, ADInplaceOrView)"
)


def test_grad_mode_train_eval_and_inference_mode_are_expected():
    frame = frame_of([GRAD], [TRAINING], [INFERENCE])
    result = account(profile_of(frame), [])
    assert [o.category for o in result.outcomes] == [EXPECTED] * 3
    assert "grad mode" in result.outcomes[0].why and "train/eval" in result.outcomes[1].why
    assert "inference_mode" in result.outcomes[2].why
    assert result.summary() == "3 recompiles: 0 with a proposed fix, 0 with no fix (why given), 3 expected"


def test_counts_add_up_and_limit_hits_are_not_recompiles():
    scalar = ["0/0: c == 0.5  # return x * c  # train.py:4 in forward"]
    frame = frame_of(
        scalar, scalar, [GRAD], ["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5"], limit=True
    )
    other = frame_of(["0/0: G['N'] == 3"], name="other")
    profile = profile_of(frame, other)
    result = account(profile, [finding(frame, Safety.SAFE, ["c"], ["scalar_value"])])
    assert result.total == sum(f.recompiles for f in profile.frames) == 5
    assert (result.count(FIX), result.count(NO_FIX), result.count(EXPECTED)) == (2, 2, 1)
    assert result.count(FIX) + result.count(NO_FIX) + result.count(EXPECTED) == result.total
    # nothing covers the size change or the global: no fix, and the reason is named
    whys = [o.why for o in result.outcomes if o.category == NO_FIX]
    assert "no rule has a fix for this reason (tensor size changed `x` dim 0)" in whys
    assert "no rule has a fix for this reason (module global changed `G['N']`)" in whys


def test_a_finding_without_a_fix_gives_its_reason():
    frame = frame_of(["0/0: n == 2  # for _ in range(n):  # train.py:4 in forward"])
    result = account(profile_of(frame), [finding(frame, Safety.NONE, ["n"])])
    (outcome,) = result.outcomes
    assert outcome.category == NO_FIX and "RF002 [no fix]" in outcome.why and outcome.finding is not None


def test_unsafe_fix_counts_as_a_fix_unless_unsafe_fixes_are_off():
    frame = frame_of(["0/0: c == 0.5"])
    findings = [finding(frame, Safety.UNSAFE, ["c"])]
    assert account(profile_of(frame), findings).count(FIX) == 1
    assert account(profile_of(frame), findings, unsafe_fixes=False).count(NO_FIX) == 1


def test_a_recompile_is_a_fix_when_some_entry_failed_only_on_a_fixed_guard():
    # sampling: temperature outer, top_k inner. The recompile at (1.0, None): the newest entry
    # (0.8, 100) failed on temperature? no: on top_k's type; the entry (0.8, None) failed on
    # temperature alone, so wrapping temperature makes that entry serve the call.
    frame = frame_of(
        ["0/3: ___check_type_id(top_k, 94), type=<class 'int'>", "0/0: temperature == 0.8"],
        ["0/1: ___check_type_id(top_k, 94), type=<class 'int'>", "0/0: top_k is None  # if top_k is not None:"],
    )
    result = account(profile_of(frame), [finding(frame, Safety.SAFE, ["temperature"], ["scalar_value"])])
    assert [o.category for o in result.outcomes] == [FIX, EXPECTED]
    assert "switched between None and a value" in result.outcomes[1].why


def test_a_lazy_attribute_default_is_not_a_none_switch():
    frame = frame_of(["0/0: self.config.scale is None  # if self.config.scale is None:  # m.py:9 in forward"])
    (outcome,) = account(profile_of(frame), []).outcomes
    assert outcome.category == NO_FIX  # RF010's to fix, not a state of the program


def test_sizes_under_a_deliberate_dynamic_false_are_expected():
    size = ["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"]
    frame = frame_of(size, size)
    deliberate = account(profile_of(frame), [], deliberate_static=lambda f: "`dynamic=False` at train.py:2")
    assert [o.category for o in deliberate.outcomes] == [EXPECTED, EXPECTED]
    assert "dynamic=False` at train.py:2 on purpose" in deliberate.outcomes[0].why
    # ... but not when the frame hit the recompile limit: the set of sizes was not bounded
    limited = frame_of(size, size, limit=True)
    assert account(profile_of(limited), [], deliberate_static=lambda f: "x").count(EXPECTED) == 0


def test_to_json_lists_each_recompile():
    frame = frame_of([GRAD])
    data = account(profile_of(frame), []).to_json()
    assert data["recompiles"] == 1 and data["expected"] == 1
    assert data["items"] == [
        {"frame": "forward (train.py:3)", "compile": "0/1", "category": "expected", "why": data["items"][0]["why"]}
    ]


def test_a_module_int_torch_did_not_name_keeps_the_recompile_despite_the_fix():
    """torch names the first guard an entry failed: at 0/1 the dropout's p, while the run recorded
    `self.active_layers` 1 at the entry and 2 now, an int torch shows it guards (0/2 failed on
    it). A fix of p alone leaves that recompile: no fix, for the int. Where the int is the same,
    or one torch never named (made dynamic: it does not fail), the fix of p is all it takes."""
    frame = frame_of(
        ["0/0: self._modules['drop'].p == 0.1  # x = self.drop(x)  # train.py:9 in forward"],
        ["0/1: self.active_layers == 2  # for layer in self.layers[: self.active_layers]:  # train.py:8 in forward"],
    )
    p = frame.compiles[1].reasons[0].source
    fix_p = finding(frame, Safety.SAFE, [p])
    for compile_, layers in zip(frame.compiles, (1, 2, 1)):
        compile_.inputs = {"self.active_layers": {"type": "int", "value": layers}, "x": {"type": "Tensor"}}
    first = account(profile_of(frame), [fix_p]).outcomes[0]
    assert first.category == NO_FIX and first.reason.source == "self.active_layers"
    assert first.why == "no rule has a fix for this reason (attribute value changed `self.active_layers`)"
    for compile_ in frame.compiles:  # an int torch never named as failing: not guarded on its value
        compile_.inputs["self.steps"] = compile_.inputs.pop("self.active_layers")
    assert account(profile_of(frame), [fix_p]).outcomes[0].category == FIX


def test_the_optimizer_state_made_by_the_first_step_is_expected():
    """A compiled `opt.step()` compiles again once its state exists (SGD with momentum, Adam):
    `len(self.state[...]) != 0`, once; not a recompile any fix could remove."""
    frame = frame_of(["0/0: len(self.state[list(dict.keys(self.state))[0]]) != 0"], name="step")
    (outcome,) = account(profile_of(frame), []).outcomes
    assert outcome.category == EXPECTED and "state was created by its first step" in outcome.why


def test_the_summary_says_how_many_fixes_need_the_flag():
    """`report` and `apply` print the same counts (they disagreed: 3 fixes in one, 0 in the
    other); an unsafe fix is a proposed fix that needs --unsafe-fixes, and the summary says so."""
    scalar = ["0/0: c == 0.5  # return x * c  # train.py:4 in forward"]
    frame = frame_of(scalar, scalar)
    result = account(profile_of(frame), [finding(frame, Safety.UNSAFE, ["c"], ["scalar_value"])])
    assert result.summary() == (
        "2 recompiles: 2 with a proposed fix, 0 with no fix (why given), 0 expected; 2 of the fixes only with "
        "--unsafe-fixes"
    )


def test_a_recompile_that_needs_a_safe_and_an_unsafe_fix_counts_as_unsafe():
    """A size and a number changed together (the number's guard unsaid by torch, recorded failing
    by the recorder): with only the safe fix the number still recompiles, so the recompile is one
    of the fixes that need --unsafe-fixes, whichever guard torch named first."""
    from recompile_fix.profile.reasons import parse_reasons

    frame = frame_of(["0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"])
    frame.compiles[1].also_failed = parse_reasons("0/0: c == 0.5")
    size = finding(frame, Safety.SAFE, ["x"], ["size_mismatch"])
    number = finding(frame, Safety.UNSAFE, ["c"], ["scalar_value"])
    assert account(profile_of(frame), [size, number]).summary().endswith("1 of the fixes only with --unsafe-fixes")
    assert account(profile_of(frame), [size, number], unsafe_fixes=False).count(NO_FIX) == 1


def test_a_mark_on_one_dim_covers_no_size_change_of_another():
    """A fix that marks `tokens` dim 0 (the batch) fixes no change of dim 1 (the sequence length,
    which the rule refused to mark): that recompile has no fix, whatever the batch fix claims
    (a padded-to-longest LSTM loop read "7 with a proposed fix" where 1 had one)."""
    frame = frame_of(
        ["0/0: tensor 'tokens' size mismatch at index 1. expected 5, actual 8"],
        ["0/0: tensor 'tokens' size mismatch at index 0. expected 8, actual 3"],
    )
    marked = finding(frame, Safety.SAFE, ["tokens"], ["size_mismatch"])
    marked.covers = [cover(frame, ["tokens"], ["size_mismatch"], [("tokens", 0)])]
    result = account(profile_of(frame), [marked])
    assert [o.category for o in result.outcomes] == [NO_FIX, FIX]
    assert result.outcomes[0].why == "no rule has a fix for this reason (tensor size changed `tokens` dim 1)"


def test_a_cache_filled_by_its_first_call_is_expected():
    """transformers' DynamicCache: prefill sees `layers[0].is_initialized` False, decode True (a
    tiny Llama's greedy generation, after its size fixes): one graph per state, compiled once."""
    frame = frame_of(["0/0: kwargs['past_key_values'].layers[0].is_initialized == False"], name="wrapped_func")
    (outcome,) = account(profile_of(frame), []).outcomes
    assert outcome.category == EXPECTED and "is now True (decode)" in outcome.why, outcome.why


def test_an_autocast_switch_is_expected():
    """Mixed precision switched on after warm-up: one graph per autocast state, like grad mode."""
    frame = frame_of(["0/0: GLOBAL_STATE changed: autocast(cpu)_enabled"])
    (outcome,) = account(profile_of(frame), []).outcomes
    assert outcome.category == EXPECTED and "one graph per autocast state" in outcome.why, outcome.why


def test_the_other_side_of_a_branch_on_a_dynamic_value_is_expected():
    """A trial's Lightning-style module after RF006 made `current_epoch` dynamic: the one recompile
    left was "other guard" (`self.current_epoch <= 0`). It is the branch's other side, once."""
    frame = frame_of(["0/0: self.current_epoch <= 0  # if self.current_epoch < self.freeze_epochs:"])
    (outcome,) = account(profile_of(frame), []).outcomes
    assert outcome.category == EXPECTED, outcome.why
    assert "a branch on `self.current_epoch` took its other side" in outcome.why
    assert "`self.current_epoch <= 0`" in outcome.why


def test_a_mode_string_or_a_flag_is_expected():
    """`mode == 'fast'`, `cfg['residual'] == True`: each value takes its own path, a bounded set of
    graphs (a new user's forward with a string mode and a dict config)."""
    frame = frame_of(["0/0: mode == 'fast'  # if mode == \"slow\":"], ["0/1: cfg['residual'] == True"])
    outcomes = account(profile_of(frame), []).outcomes
    assert [o.category for o in outcomes] == [EXPECTED, EXPECTED], [o.why for o in outcomes]
    assert "mode string" in outcomes[0].why and "a flag" in outcomes[1].why


def test_a_parameter_whose_shape_change_compiled_a_dynamic_graph_is_expected():
    """After RF001's parameter fix: the first head's graph is static, the second's traced the
    width as a symbol and serves every later head (the fix's own floor, nothing left to fix)."""
    guard = "0/0: tensor 'fn._parameters['bias']' size mismatch at index 0. expected 4, actual 5"
    frame = frame_of([guard], name="inner")
    frame.compiles[1].dims = {"fn._parameters['bias']": [{"dim": 0, "state": "dynamic"}]}
    result = account(profile_of(frame), [])
    assert result.count(EXPECTED) == 1 and "traced it dynamic" in result.outcomes[0].why
    frame.compiles[1].dims = {"fn._parameters['bias']": [{"dim": 0, "state": "specialized", "size": 5}]}
    assert account(profile_of(frame), []).count(NO_FIX) == 1  # static again: one per shape


def test_the_reports_reason_is_the_one_of_the_calls_own_state():
    """A training call after an eval pass: the newest cache entry (the eval graph) failed on grad
    mode, the training graph on the image size. The report's line names the size, as the
    accounting does (it said "grad mode changed" where torch's log shows the size)."""
    from recompile_fix.report import grouped_reasons

    size = "0/0: tensor 'x' size mismatch at index 2. expected 48, actual 64"
    frame = frame_of([GRAD], [GRAD.replace("0/0", "0/1"), size])
    assert [phrase for phrase, _, _ in grouped_reasons(frame)] == [
        "grad mode changed: `grad_mode`",
        "tensor size changed: `x` dim 2",
    ]


def test_another_module_behind_torchs_wrapper_is_expected_unless_the_limit_is_hit():
    """A trial's PPO: a policy and a value net (nn.Sequential), each `torch.compile`d, run in
    torch's one `inner` frame: the value net's other bias shape is a graph of its own, compiled
    once ("no rule has a fix" before). Where the limit was hit, many modules share it: no."""
    guard = "0/0: tensor 'fn._modules['2']._parameters['bias']' size mismatch at index 0. expected 2, actual 1"
    frame = frame_of([guard], name="inner", file="/site-packages/torch/_dynamo/external_utils.py")
    result = account(profile_of(frame), [])
    assert result.count(EXPECTED) == 1 and "a graph of its own" in result.outcomes[0].why
    limited = frame_of([guard], name="inner", file="/site-packages/torch/_dynamo/external_utils.py", limit=True)
    assert account(profile_of(limited), []).count(EXPECTED) == 0


def test_a_size_torch_did_not_name_keeps_the_recompile_despite_the_number_fix():
    """A trial's guided sampler: torch named `guidance_scale` (7.5 -> 5.0) while the latents went
    from a batch of 1 to 2 with it. Fixing the number leaves that recompile (the report had
    counted both as fixed); where the entry's graph traced the batch dynamic, or the size did
    not change, the fix is all it takes. A graph whose sizes were not recorded says nothing."""
    frame = frame_of(
        ["0/0: guidance_scale == 7.5  # x * guidance_scale  # train.py:5 in forward"],
        ["0/1: guidance_scale == 5.0  # x * guidance_scale  # train.py:5 in forward"],
    )
    fix_scale = finding(frame, Safety.SAFE, ["guidance_scale"])
    for compile_, batch in zip(frame.compiles, (1, 2, 2)):
        compile_.inputs = {"latents": {"type": "Tensor", "shape": [batch, 4, 8, 8]}}
        compile_.dims = {}
    first, second = account(profile_of(frame), [fix_scale]).outcomes
    assert first.category == NO_FIX and (first.reason.source, first.reason.dim) == ("latents", 0)
    assert first.why == "no rule has a fix for this reason (tensor size changed `latents` dim 0)"
    assert second.category == FIX  # 0/1 had the batch of 2 already
    frame.compiles[0].dims = {"latents": [{"dim": 0, "state": "dynamic"}]}
    assert account(profile_of(frame), [fix_scale]).outcomes[0].category == FIX
    frame.compiles[0].dims = None
    assert account(profile_of(frame), [fix_scale]).outcomes[0].category == FIX


def test_a_guard_no_kind_describes_is_shown_in_torchs_words():
    """A trial's T5 decode loop: "3x other guard" named nothing; the report shows the guard
    expression torch wrote (`not cache.is_updated`), without its source comment."""
    from profiles import reasons_of
    from recompile_fix.report import reason_phrase

    (reason,) = reasons_of(["0/0: not cache.is_updated      # is_updated = cache.is_updated.get(self.layer_idx)"])
    assert reason.kind == "other"
    assert reason_phrase(reason) == "other guard: `not cache.is_updated`"
    frame = profiles.frame_of([reason], name="decode_step")
    (outcome,) = account(profiles.profile_of(frame), []).outcomes
    assert outcome.why == "no rule has a fix for this reason (other guard: `not cache.is_updated`)"
