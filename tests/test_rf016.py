"""RF016 eager-library-call: the rule's decisions on hand-written Profiles (tests/profiles.py), no torch run."""

from profiles import frame_of, project_of
from recompile_fix.edits.edit import apply_edits
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Location
from recompile_fix.rules import rule_by_id

RULE = rule_by_id("RF016")

PROGRAM = """\
import torch


@torch.compile(backend="eager")
def denoise_step(latents, t):
    noise_pred = denoiser(latents)
    return scheduler.step(noise_pred, t, latents).prev_sample


for t in scheduler.timesteps:
    latents = denoise_step(latents, t)
"""
CALL = "scheduler.step(noise_pred, t, latents)"
LINE = 7  # the call's line in PROGRAM
COL = PROGRAM.splitlines()[LINE - 1].index(CALL)
SCHEDULER = "/site-packages/diffusers/schedulers/scheduling_ddim.py"


OUTER = Location("program.py", 12, 12, 14, 38, "<module>")


def _stack(*library: Location, line: int = LINE, col: int | None = COL, function: str = "denoise_step"):
    outer = OUTER
    call = Location("program.py", line, line, col, None if col is None else col + len(CALL), function)
    return [outer, call, *library]


def _frames(backend: str = "eager", **site):
    """The user's compiled step (once), DDIM's `step` and a resume piece of it that recompile for
    each timestep."""
    user = frame_of(name="denoise_step", first_line=5, backend=backend, stack=[OUTER])
    step = frame_of(
        ["timestep.item() == 875"],
        ["timestep.item() == 750"],
        name="step",
        file=SCHEDULER,
        first_line=384,
        backend=backend,
        stack=_stack(**site),
    )
    resume = frame_of(
        ["prev_timestep.item() == 750"],
        name="torch_dynamo_resume_in_step_at_449",
        file=SCHEDULER,
        first_line=449,
        backend=backend,
        stack=_stack(Location(SCHEDULER, 449, function="step"), **site),
    )
    return user, step, resume


def test_a_library_call_in_a_compiled_function_runs_eagerly(tmp_path):
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, *_frames())
    [finding] = RULE.plan(profile, project)
    assert finding.safety is Safety.SAFE  # the eager backend: the same ops, eagerly
    assert (finding.file, finding.location.line) == ("program.py", LINE)
    assert "`scheduler.step` in compiled `denoise_step`" in finding.message
    assert "(3 recompiles in 2 frames)" in finding.message
    assert {c["frame"].split(" ")[0] for c in finding.covers} == {"step", "torch_dynamo_resume_in_step_at_449"}
    source = project.source("program.py")
    assert source is not None
    edited = apply_edits(source.text, RULE.fix(finding, source, "torch"))
    assert "    return torch.compiler.disable(scheduler.step)(noise_pred, t, latents).prev_sample\n" in edited
    assert edited.replace("torch.compiler.disable(scheduler.step)", "scheduler.step") == PROGRAM
    # Applied, the Profile (recorded before) no longer says anything new.
    again = type(source).parse(source.path, edited)
    assert RULE.already_present(finding, again) is not None


def test_another_backend_makes_it_unproven(tmp_path):
    """inductor compiled the library code's graphs: run eagerly, its kernels may round otherwise."""
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, *_frames("inductor"))
    [finding] = RULE.plan(profile, project)
    assert finding.safety is Safety.UNSAFE and finding.unproven
    assert any("unproven" in note and "inductor" in note for note in finding.notes)


def test_no_finding_where_the_user_did_not_compile_the_caller(tmp_path):
    """`step = torch.compile(scheduler.step)`: the call is the user's own compiled library
    function, made from module level; running it eagerly would undo the compile."""
    user, step, resume = _frames(function="<module>")
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, user, step, resume)
    assert RULE.plan(profile, project) == []


def test_no_finding_for_a_modules_call(tmp_path):
    """A model's forward reached from the compiled function: eager, the model is not compiled."""
    user, step, resume = _frames()
    step.name = "forward"
    for compile_ in resume.compiles:
        compile_.stack[-1] = Location(SCHEDULER, 449, function="forward")
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, user, step, resume)
    assert RULE.plan(profile, project) == []


def test_no_finding_for_torchs_own_code_or_without_the_calls_span(tmp_path):
    user, step, resume = _frames()
    step.file = resume.file = "/site-packages/torch/optim/adam.py"
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, user, step, resume)
    assert RULE.plan(profile, project) == []
    # Without the call's columns (PYTHONNODEBUGRANGES=1) the line may hold several calls.
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, *_frames(col=None))
    assert RULE.plan(profile, project) == []


def test_no_finding_where_the_frames_are_reached_from_two_lines(tmp_path):
    user, step, resume = _frames()
    step.compiles[-1].stack = _stack(line=LINE - 1)
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, user, step, resume)
    [finding] = RULE.plan(profile, project)  # the resume piece alone, from one line
    assert [c["frame"].split(" ")[0] for c in finding.covers] == ["torch_dynamo_resume_in_step_at_449"]
