"""recompile_fix.rules.rf002_tensor_scalar.scalar_arguments: every Python number a compiled frame was specialised on,
from the run (issue 30, cause 4): the ones torch's guards do not name (it names the first failing
guard), and `kwargs['k']` items of a decorator's wrapper traced to the wrapped function."""

import copy
import shutil
import textwrap
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_cli
from golden_cases import GOLDEN
from profiles import profile_of
from recompile_fix.analysis.project import Project
from recompile_fix.findings.finding import UNPROVEN
from recompile_fix.profile.model import Location, Profile
from recompile_fix.rules.rf002_tensor_scalar import RULE as RF002
from recompile_fix.rules.rf002_tensor_scalar.scalar_arguments import changed_scalars


def _case(name: str, tmp_path: Path) -> tuple[Profile, Project]:
    case = GOLDEN / "RF002" / name
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    profile = Profile.load(case / "profile.json")
    return profile, Project(tmp_path, expected_hashes=profile.sources)


def test_a_scalar_no_guard_names_is_found_from_the_recorded_values(tmp_path):
    profile, _ = _case("two_annealed_scalars", tmp_path)
    (frame,) = profile.frames
    (named,) = {r.source for r in frame.reasons()}  # torch named one of the two
    hidden = ({"tau", "beta"} - {named}).pop()
    found = {a.source: a for a in changed_scalars(frame)}
    assert set(found) == {"beta", "tau"}
    assert found[named].named and not found[hidden].named
    assert found["tau"].values == [2.0, 1.75, 1.5, 1.25] and found["tau"].kind == "float"


def test_rf002_wraps_both_annealed_scalars(tmp_path):
    profile, project = _case("two_annealed_scalars", tmp_path)
    findings = {f.params["param"]: f for f in RF002.plan(profile, project) if f.params}
    assert set(findings) == {"tau", "beta"}
    (named,) = {r.source for r in profile.frames[0].reasons()}
    hidden = ({"tau", "beta"} - {named}).pop()
    assert any(f"no guard names `{hidden}`" in n for n in findings[hidden].notes)
    assert findings["tau"].params["dtype"] == "float64"  # it meets only the float32 logits


def test_a_value_that_changed_only_with_a_shape_recompile_is_not_claimed(tmp_path):
    profile, _ = _case("two_annealed_scalars", tmp_path)
    (frame,) = profile.frames
    frame = copy.deepcopy(frame)
    for compile_ in frame.compiles:  # the recompiles were for a size change, not a value guard
        for reason in compile_.reasons:
            reason.kind, reason.source = "size_mismatch", "logits"
    assert changed_scalars(frame) == []


def test_a_kwargs_item_of_a_decorated_forward_is_the_wrapped_parameter(tmp_path):
    profile, project = _case("kwargs_decorated_forward", tmp_path)
    (frame,) = profile.frames
    assert frame.name == "wrapper" and frame.signature["varkw"] == "kwargs"
    (argument,) = changed_scalars(frame)
    assert (argument.source, argument.name, argument.keyword) == (
        "kwargs['num_items_in_batch']",
        "num_items_in_batch",
        True,
    )
    (finding,) = RF002.plan(profile, project)
    assert finding.safety.value == "safe", finding.notes
    assert finding.params["param"] == "num_items_in_batch"
    start, end = finding.params["arg"]
    assert (tmp_path / "program.py").read_text()[start:end] == "num_items_in_batch"


def _left_to_a_run(finding) -> bool:
    """The keyword's wrap at the call, unproven: the uses are where the analysis cannot read."""
    return (
        finding.safety.value == "unsafe"
        and finding.unsafe_because == UNPROVEN
        and "for a run of the program to show" in finding.notes[0]
        and finding.params["param"] == "num_items_in_batch"
    )


def test_a_kwargs_item_whose_function_no_guard_shows_is_left_to_a_run(tmp_path):
    """The wrapper's **kwargs got the call's keywords: the call names the number; where it is used
    no guard shows (an older Profile, or torch gave no user line), so `fix` proves the wrap."""
    profile, project = _case("kwargs_decorated_forward", tmp_path)
    for reason in profile.frames[0].reasons():
        reason.first_use = None
    (finding,) = RF002.plan(profile, project)
    assert _left_to_a_run(finding), finding.notes


def test_the_recorder_keeps_a_module_s_own_buffers_and_parameters():
    """issue 30, cause 6: `self.gain` (a registered buffer) with its dtype, rank and device."""
    from recompile_fix.profile.module_tensors import MAX_HELD, held_tensors

    class Fake:
        def __init__(self, buffers, parameters):
            self._buffers, self._parameters = buffers, parameters

    def describe(value):
        return {"type": "Tensor", "shape": list(value), "dtype": "float32", "device": "cpu"}

    module = Fake({"gain": (8,), "unset": None}, {"weight": (8, 8)})
    assert held_tensors(module, "self", describe) == {
        "self.gain": {"type": "Tensor", "shape": [8], "dtype": "float32", "device": "cpu", "held": "buffer"},
        "self.weight": {"type": "Tensor", "shape": [8, 8], "dtype": "float32", "device": "cpu", "held": "parameter"},
    }
    many = Fake({f"b{i}": (1,) for i in range(MAX_HELD + 5)}, {})
    assert len(held_tensors(many, "self", describe)) == MAX_HELD


def test_rf009_reads_the_recorded_buffer_and_is_safe_where_it_was_unsafe(tmp_path):
    from recompile_fix.rules.rf009_schedule_tensor import RULE as RF009

    case = GOLDEN / "RF009" / "schedule_meets_buffer"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    profile = Profile.load(case / "profile.json")
    project = Project(tmp_path, expected_hashes=profile.sources)
    assert {f.safety.value for f in RF009.plan(profile, project)} == {"safe"}
    for compile_ in profile.frames[0].compiles:  # an older Profile: no buffers recorded
        compile_.inputs.pop("self.gain")
    assert "unsafe" in {f.safety.value for f in RF009.plan(profile, project)}


@pytest.mark.slow
def test_the_run_records_none_devices_and_a_module_s_buffers(tmp_path):
    """The types the rules read from the run (issue 30, causes 5 and 6): an argument passed as
    None, every tensor's device, and the buffers and parameters the compiled module holds."""
    (tmp_path / "program.py").write_text(
        textwrap.dedent("""
            import torch
            from torch import nn


            class Scaled(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(3, 3)
                    self.register_buffer("gain", torch.ones(3, dtype=torch.float64))

                def forward(self, x, c, bias=None):
                    y = self.proj(x) * c
                    return y if bias is None else y + bias


            compiled = torch.compile(Scaled(), dynamic=False)
            x = torch.randn(2, 3)
            for i in range(2):
                compiled(x, 0.5 + i, None if i else torch.zeros(3))
        """)
    )
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = profile.frames
    first, second = frame.compiles[0].inputs, frame.compiles[1].inputs
    assert first["bias"]["type"] == "Tensor" and second["bias"] == {"type": "None"}
    assert first["x"]["device"] == "cpu"
    assert first["self.gain"] == {
        "type": "Tensor",
        "shape": [3],
        "stride": [1],
        "dtype": "float64",
        "device": "cpu",
        "held": "buffer",
    }
    assert "self.proj" not in first  # a submodule's own tensors are not the compiled module's


def test_a_changed_number_no_guard_names_and_no_edit_serves_gets_no_finding(tmp_path):
    """`step` changes with the guarded `c` but reaches no tensor: torch may not guard it at all."""
    program = (
        "import torch\n\n\n@torch.compile(dynamic=False)\ndef fn(x, c, step):\n"
        "    print(step)\n    return x * c\n\n\nfor i in range(3):\n    fn(torch.ones(3), 0.5 + i, i)\n"
    )
    (tmp_path / "program.py").write_text(program)
    from recompile_fix.profile.model import Compile, Frame, Reason

    def compile_(n: int) -> Compile:
        reasons = (
            [] if n == 0 else [Reason("scalar_value", "c == 0.5", entry=f"0/{n - 1}", source="c", value_type="float")]
        )
        inputs = {"x": {"type": "Tensor", "shape": [3], "dtype": "float32"}}
        inputs |= {"c": {"type": "float", "value": 0.5 + n}, "step": {"type": "int", "value": n}}
        stack = [Location("program.py", 11, 11, 4, 34, "<module>")]
        return Compile(id=f"0/{n}", reasons=reasons, inputs=inputs, stack=stack)

    frame = Frame("program.py", 4, "fn", compiles=[compile_(n) for n in range(3)])
    assert {a.source for a in changed_scalars(frame)} == {"c", "step"}
    profile = profile_of(frame)
    found = RF002.plan(profile, Project(tmp_path))
    assert [f.params.get("param") for f in found] == ["c"], [(f.message, f.notes) for f in found]


def test_a_wrapper_that_does_not_pass_kwargs_on_as_it_got_them_is_left_to_a_run(tmp_path):
    profile, _ = _case("kwargs_decorated_forward", tmp_path)
    program = tmp_path / "program.py"
    text = program.read_text()
    assert "return fn(*args, **kwargs)" in text
    program.write_text(text.replace("return fn(*args, **kwargs)", "return fn(*args, **dict(kwargs, flag=1))"))
    (finding,) = RF002.plan(profile, Project(tmp_path))
    assert _left_to_a_run(finding), finding.notes


def test_what_the_graphs_float_constants_met_proves_a_float64_wrap():
    """`x * (1 - c)`: Python arithmetic first, on a value meeting a local the source does not type.
    The recorder read every compile's graph: its float constants met floating tensors of rank
    >= 1, where a float64 0-d tensor computes as the float did: float64, bit-identical. A 0-d
    one among them (or a compile not read) leaves the default dtype, unproven."""
    from recompile_fix.analysis.scalar_flow import TENSOR, Use
    from recompile_fix.rules.rf002_tensor_scalar.rule import _dtype

    use = Use(TENSOR, "arith", "tensor arithmetic", "program.py", 3, "return h * (1 - c)", ("h",), scalar_math=True)
    assert _dtype("float", [use], {}, ["float32:2", "float16:4"])[:2] == ("float64", True)
    assert _dtype("float", [use], {}, ["float32:0", "float32:2"])[:2] == (None, False)
    assert _dtype("float", [use], {}, None)[:2] == (None, False)


def test_a_number_whose_compiles_differ_in_a_staying_number_anyway_is_unproven(tmp_path):
    """A trial's `pick(logits, temperature, top_k)` over a grid: the compiles that share `top_k`
    (a window's width, guarded on its value: it stays a number) share `temperature` too, so
    wrapping `temperature` merges no two compiles (2 -> 2, offered as [*]): unproven, `top_k`
    named. A grid where two compiles share `top_k` and differ in `temperature` keeps the fix as it
    was. (The trial's `topk` k is symbolic under `dynamic_sources`: no longer a staying number.)"""
    from profiles import frame_of, project_of
    from recompile_fix.findings.finding import Safety

    program = textwrap.dedent(
        """\
        import torch


        @torch.compile(backend="eager")
        def pick(logits, temperature, top_k):
            return (logits / temperature).unfold(-1, top_k, 1).amax(-1)


        for temperature, top_k, n in [(0.7, 3, 5), (0.7, 3, 6), (1.0, 5, 6)]:
            pick(torch.randn(2, n), temperature, top_k)
        """
    )

    def plan(values):
        frame = frame_of(["top_k == 3"], ["top_k == 5"], name="pick", first_line=4)
        for compile_, (temperature, top_k, n) in zip(frame.compiles, values):
            compile_.stack = [Location("program.py", 10, 10, 4, 47, "<module>")]
            compile_.inputs = {
                "logits": {"type": "Tensor", "shape": [2, n], "dtype": "float32"},
                "temperature": {"type": "float", "value": temperature},
                "top_k": {"type": "int", "value": top_k},
            }
        profile, project = project_of(
            tmp_path / str(len(values[0])) / repr(values[1][0]), {"program.py": program}, frame
        )
        return {f.message.split("`")[1]: f for f in RF002.plan(profile, project)}

    found = plan([(0.7, 3, 5), (0.7, 3, 6), (1.0, 5, 6)])
    assert found["temperature"].safety is Safety.UNSAFE and found["temperature"].unproven
    assert any("`top_k` also changes" in n for n in found["temperature"].notes)
    found = plan([(0.7, 3, 5), (1.3, 3, 6), (1.0, 5, 6)])  # two compiles share top_k, not temperature
    assert found["temperature"].safety is Safety.SAFE, found["temperature"].notes


def test_a_safe_wrap_that_merges_compiles_only_with_an_unsafe_one_is_unproven(tmp_path):
    """A new user's distillation loss: `T`'s wrap (bit-identical) was offered `[*]` beside
    `alpha`'s unsafe one, and a safe `apply` left every compile (each had its own `alpha`): a
    fix that changes nothing. Now both are unsafe, `T`'s unproven with why, for `fix` to prove."""
    case = PROGRAMS / "scalars" / "kd_loss"
    shutil.copy(case / "train.py", tmp_path / "train.py")
    profile = Profile.load(case / "profile.json")
    planned = RF002.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    findings = {f.params["param"]: f for f in planned if not f.fallback}  # dynamic=True: the fallback of alpha's
    assert set(findings) == {"T", "alpha"}
    assert all(f.safety.value == "unsafe" for f in findings.values())
    assert findings["T"].unproven and "alone it merges no compiles: `alpha`" in findings["T"].notes[-1]


def test_an_int_used_as_a_size_and_in_a_branch_gets_dynamic_true_and_a_window_does_not(tmp_path):
    """A new user's trial: `n` reaches `x.view(n, -1)` and `if n > 4:`; no 0-d tensor can take its
    place, and a symbolic `n` compiles once per side of the branch (3 -> 2, as PGO's run 2):
    `dynamic_sources` names it (torch >= 2.7), else `dynamic=True` at the decorator. An int that
    sets `unfold`'s window is guarded on its value, dynamic or not."""
    from profiles import frame_of, project_of
    from recompile_fix.findings.finding import Safety

    program = textwrap.dedent(
        """\
        import torch


        @torch.compile(backend="eager")
        def regroup(x, n):
            g = x.view(n, -1)
            if n > 4:
                g = g * 2
            return g.sum(-1)


        for n in (2, 3, 6):
            regroup(torch.ones(12), n)
        """
    )

    def plan(text, torch_version="2.13.0"):
        frame = frame_of(["n == 2"], ["n == 3"], name="regroup", first_line=5)
        for compile_, n in zip(frame.compiles, (2, 3, 6)):
            compile_.stack = [Location("program.py", 13, 13, 4, 30, "<module>")]
            compile_.inputs = {
                "x": {"type": "Tensor", "shape": [12], "dtype": "float32"},
                "n": {"type": "int", "value": n},
            }
        profile, project = project_of(
            tmp_path / f"{len(text)}-{torch_version}", {"program.py": text}, frame, torch_version=torch_version
        )
        return RF002.plan(profile, project)

    (named,) = plan(program)
    assert named.safety is Safety.SAFE and named.params["config"].endswith("\"L['n']\"")
    (finding,) = plan(program, torch_version="2.6.0")
    assert finding.safety is Safety.UNSAFE and finding.unproven and finding.params["keyword"] == "dynamic"
    assert finding.message.endswith("compile `regroup` with `dynamic=True`")
    (window,) = plan(program.replace("g = x.view(n, -1)", "g = x.unfold(0, n, 1)"))
    assert window.safety is Safety.NONE
    # A trial's StaticCache position, built in the compiled code from the int: symbolic, once.
    (position,) = plan(program.replace("g = x.view(n, -1)", "g = x * torch.tensor([n], dtype=torch.long)"))
    assert position.safety is Safety.SAFE and position.params["config"].endswith("\"L['n']\"")
    (passed_through,) = plan(program.replace('@torch.compile(backend="eager")', "@torch.compile(**OPTIONS)"))
    assert passed_through.safety is Safety.NONE  # `dynamic=` may be in the dict: a second one raises


def test_dynamic_true_names_what_the_compile_call_compiles():
    """`unet = torch.compile(unet)` compiles a diffusers UNet whose frame is a decorator's
    `wrapper`: the fix read "compile `wrapper` with `dynamic=True`"; it names `unet`."""
    import libcst as cst

    from recompile_fix.analysis.compile_calls import CompileCall
    from recompile_fix.analysis.source import SourceFile

    source = SourceFile.parse(Path("program.py"), 'import torch\nunet = torch.compile(unet, backend="eager")\n')
    call = next(n for n in source.nodes(cst.Call))
    assert CompileCall(source, "program.py", call, True, False, False, False).compiled == "unet"
    decorator = SourceFile.parse(Path("program.py"), "import torch\n@torch.compile\ndef f(x):\n    return x\n")
    node = next(n for n in decorator.nodes(cst.Decorator)).decorator
    assert CompileCall(decorator, "program.py", node, False, False, False, False).compiled is None


def test_a_shape_change_hidden_behind_the_numbers_guard_is_named_without_promising_a_mark():
    """A trial's seq2seq: `trg` changed shape behind the guard on `teacher_forcing_ratio`. The note
    said "RF001 marks it dynamic" where RF001's finding said no mark can (a specialised size)."""
    from profiles import frame_of
    from recompile_fix.rules.rf002_tensor_scalar.rule import _masked_changes

    frame = frame_of(["0/0: teacher_forcing_ratio == 0.75"], name="forward")
    for compile_, rows in zip(frame.compiles, (4, 8)):
        compile_.inputs = {"trg": {"type": "Tensor", "shape": [rows, 8]}}
    [note] = _masked_changes(frame, "teacher_forcing_ratio")
    assert note.startswith("`trg` also changed shape between these compiles ([4, 8] ... [8, 8])")
    assert "a 0-d tensor does not stop those recompiles" in note and "marks it" not in note


def test_a_number_guard_on_what_the_run_recorded_as_a_tensor_is_no_argument_to_wrap():
    """A damaged Profile (the fuzz suite: a guard's source replaced by `x`) said `x == 0.2` where
    every compile recorded `x` as a tensor: RF002 wrapped the tensor in `torch.tensor(x, ...)`."""
    from profiles import frame_of
    from recompile_fix.rules.rf002_tensor_scalar.scalar_arguments import changed_scalars

    frame = frame_of(["0/0: x == 0.2"], name="forward")
    for compile_ in frame.compiles:
        compile_.inputs = {"x": {"type": "Tensor", "shape": [2, 3], "dtype": "float32"}}
    assert changed_scalars(frame) == []
    for compile_, value in zip(frame.compiles, (0.2, 0.1)):
        compile_.inputs = {"x": {"type": "float", "value": value}}
    assert [a.source for a in changed_scalars(frame)] == ["x"]


@pytest.mark.slow
def test_an_args_item_of_a_compiled_no_grad_function_is_its_parameter(tmp_path):
    """`@torch.compile` over `@torch.no_grad()` (an EMA update) compiles torch's `inner` around
    torch's `decorate_context`, both taking `*args, **kwargs`: the run records the function their
    `functools.wraps` chain ends in, so `args[2]` is `momentum` and `dynamic=True` is offered at
    the decorator (a trial: "neither shows whose parameter it is", no fix; `dynamic=True` kept
    the checksum and took 4 -> 3 compiles)."""
    (tmp_path / "program.py").write_text(
        textwrap.dedent("""
            import torch


            @torch.compile(backend="eager")
            @torch.no_grad()
            def ema_update(teacher, student, momentum):
                teacher.mul_(momentum).add_(student, alpha=1 - momentum)


            teacher, student = torch.zeros(4), torch.ones(4)
            for step in range(3):
                ema_update(teacher, student, 0.9 + 0.01 * step)
        """)
    )
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = profile.frames
    (where,) = frame.signature["closes_over"].values()
    assert where["wraps"]["name"] == "ema_update" and where["wraps"]["file"] == "program.py"
    findings = RF002.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    dynamic = [f for f in findings if "compile_call" in f.params]
    assert [(f.location.line, f.message.rsplit(": ", 1)[1]) for f in dynamic] == [
        (5, "compile `ema_update` with `dynamic=True`")
    ]
    assert dynamic[0].unsafe_because == UNPROVEN and "`momentum`" in dynamic[0].message


def test_a_value_carried_across_a_graph_break_is_no_argument_to_wrap(tmp_path):
    """A resume function's `___stack1` (a float computed before the break, a trial's numpy
    schedule read with `.item()`): no RF002 finding says it "is not a parameter", and the report
    says what the name is."""
    from recompile_fix.report import reason_phrase

    profile, project = _case("two_annealed_scalars", tmp_path)
    (frame,) = profile.frames
    for compile_ in frame.compiles:
        for reason in compile_.reasons:
            reason.source = "___stack1"
        for name in ("tau", "beta"):
            if name in compile_.inputs:
                compile_.inputs["___stack1"] = compile_.inputs.pop(name)
    assert any(a.source == "___stack1" for a in changed_scalars(frame))
    assert not [f for f in RF002.plan(profile, project) if "___stack1" in f.message]
    reason = next(r for c in frame.compiles for r in c.reasons)
    assert reason_phrase(reason).endswith("`___stack1` (a value computed before a graph break)")
