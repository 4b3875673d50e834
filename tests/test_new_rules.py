"""RF008 scheduled-dropout, RF009 schedule-tensor and RF010 lazy-default beyond the golden apply
test: what `report` says for their negative cases, and RF005's new reasons for no fix (the Profile
shows a break cannot make the prefix compile once). Recorded Profiles only: no torch run."""

import dataclasses
import shutil

import pytest

from conftest import ROOT, run_cli
from golden_cases import GOLDEN, load_case, stage_case
from profiles import profile_of
from recompile_fix.analysis.project import Project
from recompile_fix.findings.finding import Safety
from recompile_fix.findings.plan import plan
from recompile_fix.profile.model import Profile
from recompile_fix.rules import ALL_RULES, rule_by_id

# Negative cases: the line of `report` and the note that says why there is no fix.
NEGATIVE = {
    "RF008/channel_dropout": (
        "RF008 [no fix] `self._modules['drop'].p` is a dropout probability that changes",
        "`self.drop` is built as `nn.Dropout2d`, whose mask is not F.dropout's",
    ),
    "RF009/schedule_read_elsewhere": (
        "RF009 [no fix] `self.warmup[step]` in compiled `forward` indexes a list by an int that changes",
        "`self.warmup` is also used as a list: program.py:18 (`return len(self.warmup) - 1`)",
    ),
    "RF010/cache_from_input": (
        "RF010 [no fix] `self.cos_cached` is defaulted by the first call of compiled `forward`",
        "the default reads `positions` (line 17), a name of `forward`: set `self.cos_cached` where the model is "
        "built, with a representative input",
    ),
    # Only a run shows what the tensor's path computes: a candidate for `fix`, which drops it.
    "RF002/timestep_truncated": (
        "RF002 [unsafe fix] `timestep` of compiled `forward` is a Python float that changes",
        "`timestep` is type-checked by `torch.is_tensor()` at program.py:17 (`if not torch.is_tensor(timesteps):`): "
        "a 0-d tensor takes the path the code has for a tensor there",
    ),
}


def _stage(case: str, tmp_path):
    directory = GOLDEN / case
    for extra in directory.glob("*.py"):
        if extra.name not in ("program.in.py", "program.out.py"):
            shutil.copy(extra, tmp_path / extra.name)
    shutil.copy(directory / "program.in.py", tmp_path / "program.py")
    return directory


@pytest.mark.parametrize("case", NEGATIVE, ids=str)
def test_negative_case_is_left_alone_and_report_says_why(case, tmp_path):
    directory = _stage(case, tmp_path)
    assert not load_case(directory).changes
    assert (directory / "program.out.py").read_text() == (directory / "program.in.py").read_text()
    out = run_cli("report", str(directory / "profile.json"), cwd=tmp_path, check=0).stdout
    line, note = NEGATIVE[case]
    assert line in out and note in out, out
    assert "Every recompile accounted for:" in out


@pytest.mark.parametrize(
    "case, expected",
    [
        ("RF008/early_dropout", [("RF008", Safety.UNSAFE)]),
        ("RF008/stochastic_depth", [("RF008", Safety.UNSAFE)]),
        ("RF009/numpy_schedule", [("RF009", Safety.SAFE), ("RF009", Safety.SAFE)]),  # the class, the call
        ("RF009/list_schedule", [("RF009", Safety.SAFE), ("RF009", Safety.SAFE)]),
        ("RF010/config_field", [("RF010", Safety.SAFE)]),
        ("RF010/library_problem_type", [("RF010", Safety.SAFE)]),
        ("RF002/sampling_temperature", [("RF002", Safety.NONE), ("RF002", Safety.SAFE)]),  # top_k, temperature
    ],
)
def test_findings_and_every_recompile_covered(case, expected, tmp_path):
    directory = _stage(case, tmp_path)
    profile = Profile.load(directory / "profile.json")
    rule = rule_by_id(case.split("/")[0])
    findings = [f for f in plan(profile, Project(tmp_path, expected_hashes=profile.sources), ALL_RULES)]
    assert [(f.rule, f.safety) for f in findings if f.rule == rule.id] == expected
    text = run_cli("report", str(directory / "profile.json"), cwd=tmp_path, check=0).stdout
    assert "no rule has a fix" not in text  # each recompile is a fix, a [no fix] with why, or expected


def test_rf008_a_library_drop_path_is_no_fix_named_where_the_program_sets_the_rate(tmp_path):
    """timm's DropPath, scheduled by the program (`dp.drop_prob = rate`): no edit reaches the
    library's class; the report says so at the program's write, not "no rule has a fix"."""
    case = GOLDEN / "RF008" / "stochastic_depth"
    text = (case / "program.in.py").read_text()
    library = text[text.index("def drop_path(") : text.index("class Block(")]
    work = stage_case(case, tmp_path / "work", library, "from timm.layers import DropPath\n\n\n")
    profile = Profile.load(work / "profile.json")
    for reason in (r for frame in profile.frames for r in frame.reasons() if r.first_use is not None):
        # As a run with timm's DropPath records it: the read in the library's drop_path().
        reason.first_use = dataclasses.replace(reason.first_use, file="/site-packages/timm/layers/drop.py", line=168)
    findings = [
        f for f in plan(profile, Project(work, expected_hashes=profile.sources), ALL_RULES) if f.rule == "RF008"
    ]
    assert [(f.file, f.safety) for f in findings] == [("program.py", Safety.NONE)]
    written = (work / "program.py").read_text().splitlines()[findings[0].location.line - 1]
    assert "block.drop_path.drop_prob = " in written
    assert "is read by library code (`drop_path` at /site-packages/timm/layers/drop.py:168)" in findings[0].notes[0]


def test_rf008_values_stay_below_one_or_the_gate_zeroes():
    """ScheduledDropout's p == 1 path zeroes as F.dropout does (-0.0 kept), without a draw."""
    from recompile_fix.rules.rf008_scheduled_dropout.rule import HELPER

    assert "if self.drops_all:\n            return input.mul_(0.0) if self.inplace else input * 0.0" in HELPER
    assert "self.drops = bool(value > 0)" in HELPER


LIST_INDEX = """import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.schedule = [1.0 - 0.05 * i for i in range(20)]

    def forward(self, x, epoch):
        h = self.fc(x)
        t = self.schedule[epoch]
        return h * t
"""


@pytest.mark.parametrize(
    "guards, breaks, why",
    [
        (  # torch 2.13's text for a list indexed by the int (measured: RF005 makes it 8 -> 1 + 8)
            [
                "0/0: epoch == 0  # t = self.schedule[epoch]  # m.py:13 in forward (_dynamo/variables/lists.py:174 in "
                "getitem_const)"
            ],
            [],
            "`epoch` indexes a Python list at line 13",
        ),
        (  # numpy indexed by a SymInt already breaks the graph there (measured: 3 -> 4 compiles)
            ["0/0: epoch == 0  # t = self.schedule[epoch]  # m.py:13 in forward"],
            [13],
            "the graph already breaks at line 13",
        ),
        (  # the prefix recompiles for another guard: a break would not make it compile once
            [
                "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5",
                "0/0: epoch == 0  # t = self.schedule[epoch]  # m.py:13 in forward",
            ],
            [],
            "the prefix recompiles too (tensor size changed `x` (1x))",
        ),
    ],
)
def test_rf005_no_fix_where_the_prefix_would_recompile_anyway(tmp_path, guards, breaks, why):
    from recompile_fix.profile.model import Compile, Frame, GraphBreak, Location
    from recompile_fix.profile.reasons import parse_reasons

    (tmp_path / "m.py").write_text(LIST_INDEX)
    compiles = [Compile(id="0/0")]
    for n, text in enumerate(guards, start=1):
        reasons = parse_reasons(text)
        for reason in reasons:
            if reason.source == "epoch":
                reason.first_use = Location(file="m.py", line=13, function="forward")
        compiles.append(Compile(id=f"0/{n}", reasons=reasons))
    frame = Frame(
        file="m.py",
        first_line=11,
        name="forward",
        compiles=compiles,
        graph_breaks=[
            GraphBreak(Location(file="m.py", line=line), "TypeError when making fake tensor call") for line in breaks
        ],
    )
    profile = profile_of(frame, command=("python", "m.py"))
    (finding,) = rule_by_id("RF005").plan(profile, Project(tmp_path))
    assert finding.safety is Safety.NONE
    assert finding.notes[0].startswith(why), finding.notes


def test_rf005_dropped_where_another_rules_safe_fix_makes_the_frame_compile_once(tmp_path):
    """examples/large_tail.py: RF002 wraps `k`, so `pipeline` compiles once; a break would only add
    a frame."""
    from recompile_fix.findings.finding import Finding, cover
    from recompile_fix.findings.plan import _drop_splits_another_fix_makes_moot
    from recompile_fix.profile.model import Compile, Frame, Location

    frame = Frame(file="p.py", first_line=1, name="pipeline", compiles=[Compile(id="0/0"), Compile(id="0/1")])
    at = Location(file="p.py", line=5)
    split = Finding("RF005", "p.py", at, "m", Safety.UNSAFE, covers=[cover(frame, ["k"])])
    wrap = Finding("RF002", "p.py", at, "m", Safety.SAFE, covers=[cover(frame, ["k"])])
    other = Finding("RF002", "p.py", at, "m", Safety.SAFE, covers=[cover(frame, ["c"])])
    _drop_splits_another_fix_makes_moot([split, other], ALL_RULES)
    assert split.safety is Safety.UNSAFE  # another value: the break still shields k
    _drop_splits_another_fix_makes_moot([split, wrap], ALL_RULES)
    assert split.safety is Safety.NONE and "RF002's safe fix at p.py:5" in split.notes[0]


def test_rules_command_lists_the_new_rules(cli):
    out = cli("rules", check=0).stdout
    for rule_id in ("RF008", "RF009", "RF010"):
        assert rule_id in out
    docs = cli("rules", "RF009", check=0).stdout
    assert "## Fix safety" in docs and "golden/RF009/numpy_schedule" in docs


def test_docs_mention_every_rule():
    readme = (ROOT / "README.md").read_text()
    for rule in ALL_RULES:
        assert f"| {rule.id} |" in readme, rule.id


def _library_default(tmp_path, change=None):
    """RF010's findings on golden/RF010/library_problem_type's Profile, changed by ``change``."""
    _stage("RF010/library_problem_type", tmp_path)
    profile = Profile.load(GOLDEN / "RF010/library_problem_type/profile.json")
    if change is not None:
        change(profile)
    project = Project(tmp_path, expected_hashes=profile.sources)
    return [f for f in plan(profile, project, ALL_RULES) if f.rule == "RF010"]


def test_rf010_library_default_is_set_where_the_model_is_compiled(tmp_path):
    (finding,) = _library_default(tmp_path)
    assert finding.safety == Safety.SAFE and finding.location.line == 13  # the torch.compile line
    assert finding.params["text"] == 'model.config.problem_type = "single_label_classification"\n'
    assert "modeling_distilbert.py" in finding.notes[0]


def _forget_values(profile):
    for compile_ in profile.frames[0].compiles:
        compile_.inputs.pop("self.config.problem_type", None)


def _through_library(profile):
    for compile_ in profile.frames[0].compiles:
        site = compile_.stack[-1]
        compile_.stack.append(type(site)(file="/venv/site-packages/lib/trainer.py", line=10, function="train"))


@pytest.mark.parametrize(
    "change, why",
    [
        (_forget_values, "no value was recorded after the first call: set `config.problem_type` on the model"),
        (_through_library, "library code (`train` at lib/trainer.py:10) makes the compiled call"),
    ],
)
def test_rf010_library_default_without_evidence_is_no_fix(tmp_path, change, why):
    (finding,) = _library_default(tmp_path, change)
    assert finding.safety == Safety.NONE and why in " ".join(finding.notes), finding.notes


def _hidden(tmp_path, change=None):
    _stage("RF010/library_problem_type_hidden", tmp_path)
    profile = Profile.load(GOLDEN / "RF010/library_problem_type_hidden/profile.json")
    if change is not None:
        change(profile)
    return [
        f for f in plan(profile, Project(tmp_path, expected_hashes=profile.sources), ALL_RULES) if f.rule == "RF010"
    ]


def test_rf010_finds_a_library_default_another_guard_hid(tmp_path):
    # torch named only `kwargs['input_ids']`; the recorded strings and the class's file show the rest.
    (finding,) = _hidden(tmp_path)
    assert finding.safety == Safety.SAFE
    assert finding.params["text"] == 'model.config.problem_type = "single_label_classification"\n'
    assert "it names only the first that fails" in finding.notes[-1]


def test_rf010_hidden_default_needs_the_none_test_in_the_class_file(tmp_path):
    plain = tmp_path / "site-packages" / "lib" / "model.py"
    plain.parent.mkdir(parents=True)
    plain.write_text("class M:\n    def forward(self):\n        return self.config.problem_type\n")

    def elsewhere(profile):
        for compile_ in profile.frames[0].compiles:
            compile_.inputs["self"]["file"] = str(plain)

    def never_a_string(profile):
        for compile_ in profile.frames[0].compiles[1:]:
            compile_.inputs.pop("self.config.problem_type")

    assert _hidden(tmp_path, elsewhere) == [] and _hidden(tmp_path, never_a_string) == []


@pytest.mark.parametrize(
    "key, value",
    [("value", "/etc/passwd"), ("value", ""), ("value", "a\nb"), ("file", "../outside.py"), ("file", "/etc/passwd")],
)
def test_a_recorded_string_that_no_recorder_keeps_is_a_damaged_profile(tmp_path, key, value):
    # The value is written into the program as a literal: never a path or text from a Profile.
    import json

    from recompile_fix.errors import UserError

    data = json.loads((GOLDEN / "RF010/library_problem_type_hidden/profile.json").read_text())
    inputs = data["frames"][0]["compiles"][1]["inputs"]
    inputs["self.config.problem_type" if key == "value" else "self"][key] = value
    (tmp_path / "profile.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="damaged Profile"):
        Profile.load(tmp_path / "profile.json")


NESTED_COUNTER = """import torch
from torch import nn


class NoisyLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.num_updates = 0

    def forward(self, x):
        self.num_updates += 1
        return self.fc(x) * (0.5 / self.num_updates)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = NoisyLayer(8)
        self.dec = NoisyLayer(8)

    def forward(self, x):
        return self.dec(self.enc(x))


model = torch.compile(Net(), backend="eager")
for step in range(5):
    model(torch.randn(2, 8))
"""


def test_rf006_a_counter_of_a_module_the_model_holds_is_left_to_a_run(tmp_path):
    """A new user's trial: `self._modules['dec'].num_updates` (torch's spelling of a held module's
    attribute) was filed as a "Python scalar argument" with no fix. It is RF006's counter of
    `NoisyLayer`; torch names only the first failing guard (`dec`'s, while `enc` counts too), so
    its fix is unproven, for `fix` to prove, never `[*]`."""
    from profiles import frame_of, project_of

    guard = "self._modules['dec'].num_updates == {}"
    frame = frame_of(*[[guard.format(n)] for n in range(4)], name="forward", file="program.py", first_line=21)
    profile, project = project_of(tmp_path, {"program.py": NESTED_COUNTER}, frame)
    (finding,) = [f for f in rule_by_id("RF006").plan(profile, project)]
    assert finding.safety is Safety.UNSAFE and finding.unproven, finding.notes
    assert "`NoisyLayer.num_updates`" in finding.message
    assert "L['self']._modules['dec'].num_updates" in " ".join(finding.notes)


@pytest.mark.slow
def test_rf006_every_held_counter_that_changed_is_recorded_and_fixed_together(tmp_path):
    """torch names only `dec`'s guard; the recorder evaluates every cached graph's value guards
    on the recompiling call and records `enc`'s too (`Compile.also_failed`). RF006 then names
    both in one `dynamic_sources` and, nothing else changing with them, offers it as a safe fix:
    the program compiles once, with the same outputs."""
    from equivalence import assert_same_outputs, total_compiles

    (tmp_path / "program.py").write_text(NESTED_COUNTER)
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = [f for f in profile.frames if f.name == "forward"]
    recompiles = [c for c in frame.compiles if c.is_recompile and not c.limit_hit]
    assert recompiles and all(c.also_failed is not None for c in recompiles)
    assert {r.source for r in recompiles[0].value_reasons()} == {
        "self._modules['dec'].num_updates",
        "self._modules['enc'].num_updates",
    }
    (finding,) = rule_by_id("RF006").plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.safety is Safety.SAFE, finding.notes
    fixed, before, after = _applied_and_run_beside_the_original(tmp_path, NESTED_COUNTER)
    assert "L['self']._modules['enc'].num_updates" in fixed and "L['self']._modules['dec'].num_updates" in fixed
    assert total_compiles(before) == 5 and total_compiles(after) == 1
    assert_same_outputs(before, after, exact=True)


SHARED_GUARD = """import torch

torch.manual_seed(0)


@torch.compile(backend="eager")
def sample(logits, temperature, top_k):
    values = (logits[:, -1] / temperature).unfold(-1, top_k, 1).amax(-1)  # a window: guarded on its width
    return values.sum()


for length, temperature, top_k in [(5, 0.7, 20), (6, 0.7, 20), (8, 1.0, 20), (5, 1.3, 10)]:
    print(sample(torch.randn(2, length, 32), temperature, top_k).item())
"""


@pytest.mark.slow
def test_a_guard_two_graphs_hold_is_recorded_failing_in_each(tmp_path):
    """The last call changes `temperature` and `top_k`. torch names `top_k == 20` for one cached
    graph and `temperature == 0.7` for another that holds `top_k == 20` too: that graph fails on
    `top_k` unsaid, and the recorder says so for each graph (it once kept the first graph's only),
    so the accounting keeps the recompile for `top_k`, which no fix removes, not for `temperature`."""
    (tmp_path / "program.py").write_text(SHARED_GUARD)
    run_cli("profile", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = [f for f in profile.frames if f.name == "sample"]
    last = frame.compiles[-1]
    named = {(r.entry, r.source) for r in last.reasons}
    assert (frame.compiles[1].id, "temperature") in named, named
    unsaid = {(r.entry, r.source) for r in last.also_failed or ()}
    assert (frame.compiles[1].id, "top_k") in unsaid, unsaid
    report = run_cli("report", cwd=tmp_path, check=0).stdout
    assert "3 recompiles: 2 with a proposed fix, 1 with no fix (why given)" in report, report


BEHIND_A_SIZE = """import torch

torch.manual_seed(0)


@torch.compile(backend="eager")
def guided(latents, guidance_scale):
    cond, uncond = latents.chunk(2)
    return uncond + guidance_scale * (cond - uncond)


outputs = []
for batch, guidance_scale in [(2, 4.0), (2, 4.0), (3, 1.5), (3, 1.5), (4, 7.5)]:
    latents = torch.randn(2 * batch, 8)
    outputs.append(guided(latents, guidance_scale))
"""


@pytest.mark.slow
def test_a_number_that_changed_behind_a_size_guard_is_fixed_too(tmp_path):
    """The batch and the guidance scale change on the same calls: torch names the size guard
    only. The recorder's failing value guards show `guidance_scale` failing too, so RF002 wraps
    it in the same `apply` (it used to wait for a second profile), and the accounting keeps no
    recompile for it without a fix."""
    from equivalence import assert_same_outputs, total_compiles

    (tmp_path / "program.py").write_text(BEHIND_A_SIZE)
    run_cli("profile", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = [f for f in profile.frames if f.name == "guided"]
    assert "guidance_scale" not in {r.source for r in frame.reasons()}
    assert "guidance_scale" in {r.source for r in frame.value_reasons()}
    report = run_cli("report", cwd=tmp_path, check=0).stdout
    assert "with no fix" in report and ", 0 with no fix" in report, report
    fixed, before, after = _applied_and_run_beside_the_original(tmp_path, BEHIND_A_SIZE)
    assert "guided(latents, torch.tensor(guidance_scale" in fixed, fixed
    assert total_compiles(after) == 1 < total_compiles(before)
    assert_same_outputs(before, after, exact=True)


SCALED = """import functools


def apply_scale(forward_fn):
    \"\"\"A library's forward decorator, as diffusers' `apply_lora_scale` writes it.\"\"\"

    @functools.wraps(forward_fn)
    def wrapper(self, *args, **kwargs):
        return forward_fn(self, *args, **kwargs)

    return wrapper
"""

THROUGH_A_WRAPPER = """import torch
from torch import nn

from scaling import apply_scale

torch.manual_seed(0)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    @apply_scale
    def forward(self, sample, timestep, scale=1.0):
        return self.proj(sample) * scale + timestep


model = torch.compile(Denoiser(), backend="eager")
latents = torch.randn(4, 8)
with torch.no_grad():
    for t in torch.tensor([999, 800, 600, 400]):
        latents = latents - 0.001 * model(latents, int(t))
"""


@pytest.mark.slow
def test_a_number_through_a_decorators_wrapper_in_another_file_is_wrapped(tmp_path):
    """A forward decorated in another file (`wrapper(self, *args)` calls `forward_fn(self, *args)`):
    torch names `args[1]`, and only the run knows which function `forward_fn` is. The recorder
    records what the wrapper closes over; RF002 reads `timestep` there (`args[1]` binds the
    parameter after `sample`, not `sample`) and wraps the call's `int(t)`: 2 -> 1 compiles."""
    from equivalence import assert_same_outputs, total_compiles

    (tmp_path / "scaling.py").write_text(SCALED)
    (tmp_path / "program.py").write_text(THROUGH_A_WRAPPER)
    run_cli("profile", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = [f for f in profile.frames if f.name == "wrapper"]
    assert frame.signature["closes_over"]["forward_fn"] == {
        "file": "program.py",
        "line": 14,
        "name": "Denoiser.forward",
    }
    fixed, before, after = _applied_and_run_beside_the_original(tmp_path, THROUGH_A_WRAPPER)
    assert "model(latents, torch.tensor(int(t)" in fixed, fixed
    assert total_compiles(after) == 1 < total_compiles(before)
    assert_same_outputs(before, after, exact=True)


TYPE_TESTED = """import torch
from torch import nn

torch.manual_seed(0)


class Denoiser(nn.Module):
    \"\"\"A timestep embedding as diffusers' UNets take one: a number, or a tensor, each its path.\"\"\"

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 8)
        self.proj = nn.Linear(8, 8)

    def time_embedding(self, sample, timestep):
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            timesteps = torch.tensor([timesteps], dtype=torch.int64, device=sample.device)
        elif len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        return self.embed(timesteps.expand(sample.shape[0]))

    def forward(self, sample, timestep):
        return self.proj(sample) + self.time_embedding(sample, timestep)


model = torch.compile(Denoiser(), backend="eager")
latents = torch.randn(4, 8)
with torch.no_grad():
    for t in torch.tensor([999, 800, 600, 400]):
        latents = latents - 0.01 * model(latents, int(t))
print(latents.sum().item())
"""


@pytest.mark.slow
def test_a_number_the_code_type_tests_is_a_candidate_fix_keeps_by_running_it(tmp_path):
    """`if not torch.is_tensor(timesteps):` gives a tensor a path of its own, which the analysis
    does not follow: the 0-d tensor is no safe fix (plain `apply` leaves the file alone), but a
    candidate that `fix` runs: here the tensor's path computes the same, so `fix` keeps it,
    2 -> 1 compiles with the same outputs (it was "[no fix]", and `int(t)` recompiled)."""
    from equivalence import assert_same_outputs, run_recorded, total_compiles

    (tmp_path / "program.py").write_text(TYPE_TESTED)
    run_cli("profile", "--", "python", "program.py", cwd=tmp_path, check=0)
    assert "RF002 [unsafe fix] `timestep`" in run_cli("report", cwd=tmp_path, check=0).stdout
    run_cli("apply", ".", cwd=tmp_path, check=0)
    assert (tmp_path / "program.py").read_text() == TYPE_TESTED
    run_cli("fix", "--", "python", "program.py", cwd=tmp_path, check=0)
    fixed = (tmp_path / "program.py").read_text()
    assert "model(latents, torch.tensor(int(t)))" in fixed, fixed
    (tmp_path / "original.py").write_text(TYPE_TESTED)
    before, after = run_recorded(tmp_path / "original.py", tmp_path), run_recorded(tmp_path / "program.py", tmp_path)
    assert total_compiles(after) == 1 < total_compiles(before)
    assert_same_outputs(before, after, exact=True)


def _applied_and_run_beside_the_original(tmp_path, original: str) -> tuple[str, dict, dict]:
    """`apply` on the profiled program.py; its text, and the recorded runs of the original and of it."""
    from equivalence import run_recorded

    run_cli("apply", ".", cwd=tmp_path, check=0)
    (tmp_path / "original.py").write_text(original)
    before = run_recorded(tmp_path / "original.py", tmp_path)
    return (tmp_path / "program.py").read_text(), before, run_recorded(tmp_path / "program.py", tmp_path)


EMA_NO_GRAD = """import torch
from torch import nn

torch.manual_seed(0)


class EMA(nn.Module):
    def __init__(self, model, decay=0.999):
        super().__init__()
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay
        self.num_updates = 0

    @torch.no_grad()
    def forward(self, model):
        self.num_updates += 1
        d = min(self.decay, (1 + self.num_updates) / (10 + self.num_updates))
        for s, p in zip(self.shadow, model.parameters()):
            s.mul_(d).add_(p.detach(), alpha=1 - d)
        return self.shadow[0]


model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
ema = EMA(model)
update = torch.compile(ema, backend="eager")
for step in range(6):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    update(model)
"""


@pytest.mark.slow
def test_rf006_a_counter_of_a_module_compiled_through_torchs_own_wrapper(tmp_path):
    """A new user's trial: a `@torch.no_grad()` forward lives in torch's files, so
    `torch.compile(ema)` compiles torch's `inner` wrapper, whose guards name the module `fn`
    (`fn.num_updates`): "no rule has a fix". The recorder records the module it closes over;
    RF006 names `L['fn'].num_updates` (the hand fix): 6 compiles -> 1, the same tensors."""
    from equivalence import assert_same_outputs, total_compiles

    (tmp_path / "program.py").write_text(EMA_NO_GRAD)
    run_cli("profile", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = profile.frames
    assert frame.name == "inner" and frame.module_class("fn") == ("program.py", "EMA")
    (finding,) = rule_by_id("RF006").plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.safety is Safety.SAFE and "`EMA.num_updates`" in finding.message, finding.notes
    fixed, before, after = _applied_and_run_beside_the_original(tmp_path, EMA_NO_GRAD)
    assert "dynamic_sources = \"L['fn'].num_updates\"" in fixed
    assert total_compiles(before) == 6 and total_compiles(after) == 1
    assert_same_outputs(before, after, exact=True)


STEP_AND_OPTIMIZER = """import torch
from torch import nn


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.step = 0

    def forward(self, x):
        self.step += 1
        return self.fc(x) * self.step


student = Student()
opt = torch.optim.SGD(student.parameters(), lr=0.1)
model = torch.compile(student)
for i in range(4):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
"""


def test_rf006_a_method_of_the_same_name_is_not_a_read_of_the_counter(tmp_path):
    """A new user's trial: `Student.step` (an int counter) was "used in `opt.step()`", the
    optimizer's method, which kept it out of a tensor. A called attribute is never the int."""
    from profiles import frame_of, project_of

    frame = frame_of(*[[f"self.step == {n}"] for n in range(4)], name="forward", file="program.py", first_line=11)
    profile, project = project_of(tmp_path, {"program.py": STEP_AND_OPTIMIZER}, frame)
    (finding,) = rule_by_id("RF006").plan(profile, project)
    assert not any("opt.step()" in note for note in finding.notes), finding.notes
    assert finding.safety is Safety.SAFE


def test_the_report_names_the_values_that_changed_beside_torchs_guard(tmp_path):
    """The recorded `also_failed` guards are shown under the frame's reasons, and a held module's
    attribute reads as one (it read "Python scalar argument changed")."""
    from profiles import frame_of, project_of
    from recompile_fix.profile.reasons import parse_reasons
    from recompile_fix.report import render_text

    guard = "self._modules['dec'].num_updates == {}"
    frame = frame_of(*[[guard.format(n)] for n in range(3)], name="forward", file="program.py", first_line=21)
    for n, compile_ in enumerate(frame.compiles[1:]):
        compile_.also_failed = parse_reasons(f"0/{n}: self._modules['enc'].num_updates == {n}")
    profile, _ = project_of(tmp_path, {"program.py": NESTED_COUNTER}, frame)
    text = render_text(profile)
    assert "3x attribute value changed: `self._modules['dec'].num_updates`" in text, text
    assert "3x changed too, which torch did not name: `self._modules['enc'].num_updates`" in text, text


def test_the_items_of_one_list_that_changed_beside_torchs_guard_are_one_line(tmp_path):
    """A trial's REINFORCE: each episode's `rewards` list changed length (torch's guard) and its
    items with it: 48 lines of "`rewards[i]`" became one for the list."""
    from profiles import frame_of, project_of
    from recompile_fix.profile.reasons import parse_reasons
    from recompile_fix.report import render_text

    frame = frame_of(*[[f"len(rewards) == {n}"] for n in (4, 5, 6)], name="loss", file="program.py", first_line=21)
    for n, compile_ in enumerate(frame.compiles[1:]):
        texts = [f"0/{n}: rewards[{i}] == 0.{i + n}" for i in range(5 + n)] + [f"0/{n}: beta == 0.{n + 1}"]
        compile_.also_failed = [r for text in texts for r in parse_reasons(text)]
    profile, _ = project_of(tmp_path, {"program.py": NESTED_COUNTER}, frame)
    text = render_text(profile)
    assert "3x changed too, which torch did not name: 7 items of `rewards` (`rewards[0]` ... `rewards[6]`)" in text
    assert "`rewards[3]`" not in text, text
    assert "3x changed too, which torch did not name: `beta`" in text, text
