"""Facts the run records instead of the rules guessing them from source text (issue 30, cause 6):
the backend torch compiled each frame with, however the program chose it (``backend=args.backend``,
a variable, a callable), and the number of blocks of a recorded stack. RF004 reads both: with the
eager backend on torch before 2.14 a training program gets no region at all (backward through it
fails), and a stack built from a config gets its recorded count."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_cli, run_python
from recompile_fix.analysis.project import Project
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import BlockStack, Compile, Frame, Profile, sha256_bytes
from recompile_fix.rules import rule_by_id

RF004 = rule_by_id("RF004")

TRAINING = """
import argparse

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return x + self.lin(x)


class Model(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.blocks = nn.ModuleList(Block(8) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="eager")
parser.add_argument("--depth", type=int, default=6)
args = parser.parse_args()
model = torch.compile(Model(args.depth), backend=args.backend)
model(torch.randn(2, 8)).sum().backward()
"""


def _forward_line(text: str) -> int:
    lines = text.splitlines()
    return len(lines) - lines[::-1].index("    def forward(self, x):")


def _profile(tmp_path: Path, backends: list[str | None], *, stacks=None, forced: str | None = None) -> Profile:
    (tmp_path / "model.py").write_text(TRAINING)
    compiles = [
        Compile(id=f"0/{i}", seconds={"dynamo": 1.0}, backend=backend, blocks=stacks if i == 0 else None)
        for i, backend in enumerate(backends)
    ]
    return Profile(
        command=["python", "model.py"],
        torch_version="2.13.0+cpu",
        python_version="3.11",
        frames=[Frame("model.py", _forward_line(TRAINING), "forward", compiles=compiles)],
        sources={"model.py": sha256_bytes(TRAINING.encode())},
        backend=forced,
        trains=True,
    )


def _rf004(tmp_path: Path, profile: Profile):
    findings = RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert len(findings) == 1, [f.describe() for f in findings]
    return findings[0]


def test_the_recorded_eager_backend_blocks_a_region_the_source_cannot_name(tmp_path):
    """`backend=args.backend`: the source names no backend; the run recorded "eager", with which
    backward through the region fails on torch 2.13 (no fix at all, not even unsafe)."""
    finding = _rf004(tmp_path, _profile(tmp_path, ["eager"]))
    assert finding.safety is Safety.NONE
    notes = " ".join(finding.notes)
    assert "the run compiled `forward (model.py:" in notes and "fake_mode should be enabled for HOPs" in notes


def test_without_the_recorded_backend_the_source_text_decides(tmp_path):
    # An older Profile (no backend recorded): the text has no backend="eager", so the region is
    # only unsafe (what the crash in backward came from).
    finding = _rf004(tmp_path, _profile(tmp_path, [None]))
    assert finding.safety is Safety.UNSAFE and "fake_mode" not in " ".join(finding.notes)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_recorded_backend_that_runs_backward_is_no_blocker(tmp_path, backend):
    finding = _rf004(tmp_path, _profile(tmp_path, [backend]))
    assert finding.safety is Safety.UNSAFE and "fake_mode" not in " ".join(finding.notes)


def test_the_number_of_blocks_comes_from_the_run_when_the_source_does_not_say(tmp_path):
    stack = BlockStack(path="blocks", count=6, block="Block", file="model.py", line=8, owner="Model")
    finding = _rf004(tmp_path, _profile(tmp_path, ["aot_eager"], stacks=[stack]))
    assert finding.evidence["blocks"] == 6 and "runs 6 `Block` blocks" in finding.message
    assert "not a constant in the source" not in " ".join(finding.notes)
    # Without the recorded stack the count is unknown, and the finding says so.
    unknown = _rf004(tmp_path, _profile(tmp_path, ["aot_eager"]))
    assert unknown.evidence["blocks"] is None and "not a constant in the source" in " ".join(unknown.notes)


def test_a_recorded_stack_below_the_minimum_gets_no_finding(tmp_path):
    stack = BlockStack(path="blocks", count=2, block="Block", file="model.py", line=8, owner="Model")
    profile = _profile(tmp_path, ["inductor"], stacks=[stack])
    assert RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources)) == []


def test_the_backend_round_trips_and_a_damaged_one_is_refused(tmp_path):
    profile = _profile(tmp_path, ["eager", "eager"])
    again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
    assert again.frames[0].backends == ["eager"] and again.backends_used() == ["eager"]
    data = profile.to_json()
    data["frames"][0]["compiles"][0]["backend"] = 3
    with pytest.raises(UserError, match=r"compiles\[0\]\.backend"):
        Profile.from_json(data)
    older = profile.to_json()
    for compile_ in older["frames"][0]["compiles"]:
        del compile_["backend"]
    assert Profile.from_json(older).backends_used() == []  # an older Profile still loads


def _profile_run(tmp_path: Path, program: str, *args: str) -> Profile:
    (tmp_path / "program.py").write_text(textwrap.dedent(program))
    run_cli("profile", "--", "python", "program.py", *args, cwd=tmp_path, check=0)
    return Profile.load(tmp_path / ".recompile-fix" / "profile.json")


@pytest.mark.slow
def test_the_run_records_the_backend_however_the_program_chose_it(tmp_path):
    program = """
        import sys
        import torch

        def my_backend(gm, example_inputs):
            return gm.forward

        BACKENDS = {"eager": "eager", "aot": "aot_eager", "mine": my_backend}

        def double(x):
            return x * 2

        def triple(x):
            return x * 3

        def quadruple(x):
            return x * 4

        chosen = sys.argv[1]
        torch.compile(double, backend=BACKENDS[chosen])(torch.ones(2))
        torch.compile(triple, backend=BACKENDS["aot"])(torch.ones(2))
        torch.compile(quadruple, backend=BACKENDS["mine"])(torch.ones(2))
    """
    profile = _profile_run(tmp_path, program, "eager")
    recorded = {f.name: f.backends for f in profile.frames}
    assert recorded == {"double": ["eager"], "triple": ["aot_eager"], "quadruple": ["my_backend"]}
    assert profile.backend is None  # nothing forced: these are the program's own choices


@pytest.mark.slow
def test_a_training_script_with_backend_from_its_arguments_gets_no_crashing_region(tmp_path):
    """The crash issue 30 measured: `--backend eager` passed to the script (not to `profile`),
    RF004 offered as an unsafe fix, and backward through the region failed. Now the run records
    the backend and the six blocks; `apply --unsafe-fixes` writes no region."""
    (tmp_path / "model.py").write_text(TRAINING)
    run_cli("profile", "--", "python", "model.py", "--backend", "eager", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = [f for f in profile.frames if f.name == "forward"]
    assert frame.backends == ["eager"] and [s.count for s in frame.block_stacks] == [6]
    result = run_cli("apply", ".", "--unsafe-fixes", "--select", "RF004", cwd=tmp_path, check=0)
    assert (tmp_path / "model.py").read_text() == TRAINING
    assert "RF004 [no fix]" in result.stdout and "backward through the region fails" in result.stdout


SAME_TENSOR_TWICE = """
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.name_or_path = ""  # as a transformers model built from a config has it
        self.lin = nn.Linear(4, 4)

    def forward(self, inputs, labels):
        return (self.lin(inputs) - labels).pow(2).mean()


tag = ""
model = torch.compile(Head())
for n in (2, 3, 4, 5):
    ids = torch.randn(n, 4)
    model(inputs=ids, labels=ids)
"""


@pytest.mark.slow
def test_a_tensor_passed_twice_is_marked_once_and_an_empty_string_keeps_the_profile_valid(tmp_path):
    """`model(input_ids=ids, labels=ids)` (a transformers training step): one mark for `ids`,
    not one per argument it was seen through. The model's `name_or_path = ""` is the same object
    as every other "": the Profile the run wrote loads (it was "damaged" before)."""
    (tmp_path / "train.py").write_text(SAME_TENSOR_TWICE)
    run_cli("profile", "--backend", "eager", "--", "python", "train.py", cwd=tmp_path, check=0)
    diff = run_cli("apply", "--diff", ".", cwd=tmp_path, check=1).stdout
    assert diff.count("mark_dynamic(ids, 0)") == 1, diff


def test_a_string_is_never_said_to_be_held_by_the_users_frame(monkeypatch):
    """Every "" is one object: the user's `tag = ""` is not what holds a model's `name_or_path`
    (the recorder wrote `{"type": "str", "held_by": "tag"}`, with no value, which failed
    validation: every command after `profile` refused the Profile as damaged)."""
    import torch

    from recompile_fix.profile.recorder import inputs

    tag, ids = "", torch.ones(2)
    walk = inputs.InputWalk(torch)
    walk.visit("self.name_or_path", tag, 1)
    walk.visit("ids", ids, 0)
    monkeypatch.setattr(inputs, "user_frame_past_library", lambda frame: frame)
    inputs._note_holders(walk, sys._getframe())
    assert "self.name_or_path" not in walk.entries and walk.entries["ids"]["held_by"] == "ids"


def test_a_profile_recorded_with_a_held_string_and_no_value_still_loads(tmp_path):
    """Profiles the recorder wrote that way are committed in users' projects: they load."""
    from recompile_fix.profile.model import Profile

    data = json.loads((Path(__file__).parent / "programs" / "two_files" / "profile.json").read_text())
    inputs = next(c for f in data["frames"] for c in f["compiles"] if c.get("inputs"))["inputs"]
    inputs["self.name_or_path"] = {"type": "str", "held_by": "tag"}
    (tmp_path / "profile.json").write_text(json.dumps(data))
    assert Profile.load(tmp_path / "profile.json").frames
    inputs["self.name_or_path"]["value"] = ""  # a value, when there is one, is still checked
    (tmp_path / "profile.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="name_or_path"):
        Profile.load(tmp_path / "profile.json")


ONE_SIZE_BESIDES_ONE = """
import torch


@torch.compile
def denoise(sample, timestep):
    return sample * 2 + timestep


for batch, timestep in ((2, 750), (2, 500), (1, 500)):
    x = torch.randn(batch, 3)
    denoise(x, timestep)
"""


@pytest.mark.slow
def test_a_mark_that_would_merge_no_compile_is_not_offered(tmp_path):
    """Batches of 2, 2 and 1 with a `timestep` that changes between the first two: the second
    compile is the int's, the third size 1's (specialised even when marked): a mark removes
    neither (verify measured 3 -> 3 on a diffusers UNet), so RF001 offers no fix and says why."""
    (tmp_path / "infer.py").write_text(ONE_SIZE_BESIDES_ONE)
    run_cli("profile", "--backend", "eager", "--", "python", "infer.py", cwd=tmp_path, check=0)
    report = run_cli("report", "--output-format", "full", cwd=tmp_path).stdout
    (rf001,) = [line for line in report.splitlines() if "RF001" in line]
    assert "[no fix]" in rf001 and "would not reduce the 3 compiles" in report, report


TRACED_GRAD = """import torch
from torch import nn

torch._dynamo.config.trace_autograd_ops = True
torch.manual_seed(0)
D = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))


@torch.compile(backend="eager")
def penalty(x):
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(D(x).sum(), x, create_graph=True)
    return ((g.norm(2, dim=1) - 1) ** 2).mean()


for _ in range(3):
    penalty(torch.randn(4, 8)).backward()
"""


@pytest.mark.slow
def test_noting_the_backward_pass_leaves_torch_autograd_grad_to_dynamo(tmp_path):
    """A new user's trial: the recorder put a wrapper (skipped by dynamo) in place of
    `torch.autograd.grad` to note a backward pass; with `trace_autograd_ops=True` the profiled
    program broke its graph there, compiled a frame more than it does, and the break was named
    in the tool's own file. It notes the engine's entry point instead."""
    (tmp_path / "train.py").write_text(TRACED_GRAD)
    run_cli("profile", "--", "python", "train.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    assert profile.trains
    breaks = [b for f in profile.frames for b in f.graph_breaks]
    assert all(b.location.file == "train.py" for b in breaks), breaks
    assert "program_facts" not in json.dumps(profile.to_json())
    assert sum(f.compile_count for f in profile.frames) == 2  # as the program compiles on its own


PGO_SIZES = """
import torch

model = torch.nn.Linear(8, 4)


@torch.compile(backend="eager")
def run(x):
    return model(x).relu().sum()


for n in (3, 4, 5, 6):
    run(torch.randn(n, 8))
print(torch._dynamo.utils.counters["stats"]["unique_graphs"])
"""


@pytest.mark.slow
def test_a_job_ids_pgo_state_neither_hides_the_recompiles_nor_is_touched(tmp_path, monkeypatch):
    """With TORCH_COMPILE_JOB_ID set, torch's PGO made the second run of a program compile once
    where the first compiled twice: a Profile recorded then showed no recompile, and `fix` fixed
    nothing, though the recompile comes back whenever the file changes (and `verify`'s edited copy
    lost the state its unedited run had). A recorded run compiles as a first run does, says so,
    and leaves PGO's state file as it was."""
    (tmp_path / "train.py").write_text(PGO_SIZES)
    monkeypatch.setenv("TORCH_COMPILE_JOB_ID", "rf-test-job")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    plain = [run_python("train.py", cwd=tmp_path) for _ in "12"]
    assert [p.stdout.split()[-1] for p in plain] == ["2", "1"], plain  # PGO's second run: one graph
    (state,) = (tmp_path / "cache" / "dynamo").glob("code_state_*.pkl")
    written = state.read_bytes()

    done = run_cli("profile", "--backend", "eager", "--", "python", "train.py", cwd=tmp_path, check=0)
    assert "TORCH_COMPILE_JOB_ID=rf-test-job: PGO's state was neither read nor written" in done.stderr
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    assert sum(f.recompiles for f in profile.frames) == 1
    assert state.read_bytes() == written
    diff = run_cli("apply", ".", "--diff", cwd=tmp_path, check=1).stdout
    assert "+    torch._dynamo.mark_dynamic(" in diff


# OneCycleLR's step compiled with `dynamic=True`: its lr and betas are float inputs.
SCHEDULED_STEP = (
    (PROGRAMS / "scalars" / "one_cycle_step.py")
    .read_text()
    .replace("@torch.compile\n", '@torch.compile(backend="eager", dynamic=True)\n')
)


@pytest.mark.slow
def test_recording_the_weights_at_exit_does_not_make_the_step_recompile(tmp_path, monkeypatch):
    """Noting the optimizers whose weights `fix` and `verify` compare at exit must not change
    how the step compiles: a global step hook runs inside the compiled step, where dynamo traces
    it (one that held the param groups there was guarded on what it had seen, and the step's
    last frame recompiled in every run that recorded outputs). They are noted where built."""
    (tmp_path / "train.py").write_text(SCHEDULED_STEP)
    counts = []
    for record in (False, True):
        if record:
            monkeypatch.setenv("RECOMPILE_FIX_RECORD_OUTPUTS", str(tmp_path / "outputs"))
        run_cli(
            "profile", "--backend", "eager", "-o", f"p{record}.json", "--", "python", "train.py", cwd=tmp_path, check=0
        )
        profile = Profile.load(tmp_path / f"p{record}.json")
        counts.append(
            (
                sum(f.compile_count for f in profile.frames),
                sum(f.recompiles for f in profile.frames),
                sorted(f"{b.location.file}:{b.location.line}" for f in profile.frames for b in f.graph_breaks),
            )
        )
    assert counts[1] == counts[0] and counts[0][1] == 0, counts
    assert list((tmp_path / "outputs").glob("*.pt")), "the outputs were recorded"
