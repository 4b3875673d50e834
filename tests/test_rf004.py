"""RF004 nested-compile-region beyond the golden cases: the reasons it gives no safe edit (print,
BatchNorm in training, aliasing, data-dependent branches, an old torch), the shapes of block
stacks it finds, and a training step through the rewritten model."""

import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import ROOT, run_cli, run_python
from profiles import frame_of, profile_of, project_of, write_files
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.rewrite import rewrite
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Profile, sha256_bytes, torch_release
from recompile_fix.rules import rule_by_id

RF004 = rule_by_id("RF004")
GOLDEN = ROOT / "golden" / "RF004"

BLOCK = """
import torch
from torch import nn
{imports}

class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)
{init}
{methods}
    def forward(self, x{params}):
{body}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(8) for _ in range({count}))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
{tail}"""


def static(text: str, path: str = "model.py"):
    return RF004.plan_static(SourceFile.parse(Path(path), text), path)


def source(
    body: str, *, imports: str = "", init: str = "", methods: str = "", params: str = "", count: int = 6, tail: str = ""
) -> str:
    return BLOCK.format(
        imports=imports,
        init=textwrap.indent(init, " " * 8),
        methods=textwrap.indent(methods, " " * 4),
        params=params,
        body=textwrap.indent(body, " " * 8),
        count=count,
        tail=tail,
    )


def block(body: str, **parts):
    return static(source(body, **parts))


def first_body_line(text: str) -> int:
    return text.splitlines().index("    def forward(self, x):") + 2


def model_forward_line(text: str) -> int:
    lines = text.splitlines()
    return len(lines) - lines[::-1].index("    def forward(self, x):")


def only(findings):
    assert len(findings) == 1, [f.describe() for f in findings]
    return findings[0]


def notes(finding) -> str:
    return " ".join(finding.notes)


def plan_golden(case: str, tmp_path: Path):
    """Plan a golden case from its recorded Profile, as apply does (Profile, then static)."""
    shutil.copy(GOLDEN / case / "program.in.py", tmp_path / "program.py")
    profile = Profile.load(GOLDEN / case / "profile.json")
    project = Project(tmp_path, expected_hashes=profile.sources)
    from_profile = RF004.plan(profile, project)
    from_source = RF004.plan_static(project.source("program.py"), "program.py")
    return from_profile, from_source


# -- the negative cases of the issue ---------------------------------------------------------
def test_print_in_the_block_gets_no_edit_and_says_why(tmp_path):
    from_profile, from_source = plan_golden("print_block", tmp_path)
    for finding in (only(from_profile), only(from_source)):
        assert finding.safety is Safety.NONE and finding.location.line == 10
        assert "calls `print()` (line 11)" in notes(finding)
        assert "a graph break inside the region is an error, even without fullgraph" in notes(finding)
    # The Profile saw the break, and torch compiling the block as a frame of its own.
    assert "the Profile recorded a graph break inside the block at program.py:11" in notes(from_profile[0])
    assert "`forward` is compiled as a frame of its own" in notes(from_profile[0])


def test_batchnorm_block_in_training_gets_no_edit_and_says_why(tmp_path):
    from_profile, _ = plan_golden("batchnorm_training", tmp_path)
    finding = only(from_profile)
    assert finding.confidence == "profile" and finding.safety is Safety.NONE
    assert "`self.bn` (BatchNorm1d, line 12) updates its running statistics buffers in place" in notes(finding)
    assert "the program trains (`loss.backward()` at program.py:36)" in notes(finding)
    assert "rejects in-place input or buffer mutation in training" in notes(finding)


def test_batchnorm_block_without_training_is_only_unsafe():
    finding = only(block("return x + self.bn(self.lin(x))", init="self.bn = nn.BatchNorm1d(width)"))
    assert finding.safety is Safety.UNSAFE
    assert "no `.backward()` was seen" in notes(finding)


def test_profile_finding_confirms_the_inlining_frame(tmp_path):
    from_profile, _ = plan_golden("deep_blocks_module", tmp_path)
    finding = only(from_profile)
    assert finding.safety is Safety.SAFE and finding.location.line == 15
    assert finding.evidence["frame"].startswith("forward (program.py:") and finding.evidence["blocks"] == 8
    assert finding.evidence["compile_seconds"] > 0 and "inline in compiled `forward`" in finding.message


# -- what makes a block unsafe or unfixable --------------------------------------------------
@pytest.mark.parametrize(
    "body, why",
    [
        ("s = x.sum().item()\nreturn self.lin(x) * s", "`.item()` (line {line}) reads a tensor into Python"),
        (
            "if x.sum() > 0:\n    return self.lin(x)\nreturn x * 2",
            "branches on a tensor's value (line {line}: `x.sum() > 0`)",
        ),
        ("if x > 0:\n    x = x * 2\nreturn self.lin(x)", "branches on a tensor's value"),
        ("return x", "returns its input `x` (line {line})"),
        ("return x.view(-1, 8)", "returns a view of its input `x`"),
        ("logger.info('hi')\nreturn x + self.lin(x)", "`logger.info()` (line {line}) is not traceable"),
        ("warnings.warn('hi')\nreturn x + self.lin(x)", "`warnings.warn()` (line {line}) is not traceable"),
        ("torch._dynamo.graph_break()\nreturn self.lin(x)", "breaks the graph"),
    ],
)
def test_certain_graph_breaks_get_no_edit(body, why):
    text = source(body, imports="import logging\nimport warnings\nlogger = logging.getLogger(__name__)")
    finding = only(static(text))
    assert finding.safety is Safety.NONE
    assert why.format(line=first_body_line(text)) in notes(finding)


@pytest.mark.parametrize(
    "body, why",
    [
        (
            "return x + helper(self.lin(x))",
            "calls `helper(...)` (line {line}), defined outside what the analysis can see",
        ),
        ("return x + self.act(self.lin(x))", "calls `self.act` (line {line}), set to `ACTIVATIONS['gelu']`"),
        ("x.add_(1)\nreturn self.lin(x)", "`x.add_()` (line {line}) mutates the input `x` in place"),
        ("x += 1\nreturn self.lin(x)", "`x += 1` (line {line}) mutates the input `x` in place"),
        ("return super().forward(x)", "calls `super().forward(...)`"),
    ],
)
def test_what_the_analysis_cannot_vouch_for_is_unsafe(body, why):
    text = source(body, imports="from helpers import helper, ACTIVATIONS", init="self.act = ACTIVATIONS['gelu']")
    finding = only(static(text))
    assert finding.safety is Safety.UNSAFE
    assert why.format(line=first_body_line(text)) in notes(finding)


@pytest.mark.parametrize(
    "body",
    [
        "if x.shape[0] > 1 and self.training:\n    x = x * 2\nreturn x + self.lin(x)",
        "h = self.helper(x)\nreturn h * math.sqrt(2)",
        "y = F.gelu(self.lin(x))\nreturn (x + y).view(-1, 8)",
        "return x + self.unused_in_forward(x)",
    ],
)
def test_traceable_blocks_are_safe(body):
    finding = only(
        block(
            body,
            imports="import math\nimport torch.nn.functional as F",
            init="self.unused_in_forward = nn.Sequential(nn.Linear(width, width), nn.ReLU())\n"
            "self.never_called = nn.BatchNorm1d(width)",
            methods="def helper(self, x):\n    return self.lin(x)\n",
        )
    )
    assert finding.safety is Safety.SAFE, finding.notes


def test_buffer_mutation_and_backward_in_the_file():
    found = block(
        "self.steps.add_(1)\nreturn x + self.lin(x)",
        init="self.register_buffer('steps', torch.zeros(()))",
        tail="\nloss = Model()(torch.randn(2, 8)).sum()\nloss.backward()\n",
    )
    finding = only(found)
    assert finding.safety is Safety.NONE
    assert "mutates the buffer `steps` in place" in notes(finding) and "the program trains" in notes(finding)


def test_training_under_inductor_is_unsafe_for_its_gradients():
    finding = only(
        block(
            "return x + self.lin(x)",
            tail="\nstep = torch.compile(Model())\nstep(torch.randn(2, 8)).sum().backward()\n",
        )
    )
    assert finding.safety is Safety.UNSAFE and finding.evidence["trains"] is True
    assert "the program trains (`step(torch.randn(2, 8)).sum().backward()` at model.py:" in notes(finding)
    assert "corrupt the gradients of a reused region" in notes(finding) and "allow_buffer_reuse = False" in notes(
        finding
    )
    assert "fake_mode" not in notes(finding)


def test_a_training_script_beside_the_model_file_makes_the_fix_the_training_one(tmp_path):
    """The block file trains nowhere itself, and the run profiled may be inference only
    (`sample.py`); `train.py` beside it runs a backward pass through the same blocks: the fix is
    the training one (unsafe, buffer reuse off), never [*] (measured: gradients 4-40% off
    under inductor without `allow_buffer_reuse = False`)."""
    (tmp_path / "model.py").write_text(source("return x + self.lin(x)"))
    (tmp_path / "sample.py").write_text("import torch\nfrom model import Model\nprint(Model()(torch.randn(2, 8)))\n")
    alone = run_cli("apply", ".", "--check", "--output-format", "concise", cwd=tmp_path, check=1).stdout
    assert "RF004 [*]" in alone, alone
    (tmp_path / "train.py").write_text(
        "import torch\nfrom model import Model\nmodel = Model()\nloss = model(torch.randn(2, 8)).sum()\nloss.backward()\n"
    )
    beside = run_cli("apply", ".", "--check", "--output-format", "concise", cwd=tmp_path, check=0).stdout
    assert "RF004 [unsafe fix]" in beside, beside
    diff = run_cli("apply", ".", "--unsafe-fixes", "--diff", cwd=tmp_path, check=1).stdout
    assert "allow_buffer_reuse = False" in diff and "nested_compile_region" in diff
    report = run_cli("apply", "model.py", "--check", "--output-format", "full", cwd=tmp_path, check=0).stdout
    assert "`loss.backward()` at train.py:5" in report, report


EAGER_TRAINING = '\nstep = torch.compile(Model(), backend="eager")\nstep(torch.randn(2, 8)).sum().backward()\n'


def _profile_of(tmp_path, text: str, version: str, backend: str | None = None) -> Profile:
    frame = frame_of(name="forward", file="model.py", first_line=model_forward_line(text), seconds={"dynamo": 1.0})
    profile, _ = project_of(tmp_path, {"model.py": text}, frame, torch_version=version, backend=backend)
    return profile


@pytest.mark.parametrize("version", ["2.8.0", "2.10.0", "2.13.0+cpu"])
def test_training_with_the_eager_backend_before_2_14_gets_no_edit(tmp_path, version):
    """Backward through a region compiled with backend="eager" fails on torch 2.8 to 2.13
    (measured: "fake_mode should be enabled for HOPs"); a safe or unsafe fix would crash."""
    text = source("return x + self.lin(x)", tail=EAGER_TRAINING)
    profile = _profile_of(tmp_path, text, version)
    finding = only(RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources)))
    assert finding.safety is Safety.NONE
    assert 'compiles with backend="eager" (model.py:' in notes(finding)
    assert "AssertionError: fake_mode should be enabled for HOPs" in notes(finding)
    assert "pytorch/pytorch#184700" in notes(finding)


def test_the_profiles_forced_eager_backend_counts_too(tmp_path):
    text = source(
        "return x + self.lin(x)", tail="\nstep = torch.compile(Model())\nstep(torch.randn(2, 8)).sum().backward()\n"
    )
    profile = _profile_of(tmp_path, text, "2.13.0+cpu", backend="eager")
    finding = only(RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources)))
    assert finding.safety is Safety.NONE
    assert "the Profile was recorded with `--backend eager`" in notes(finding)


@pytest.mark.parametrize("version", ["2.14.0", "2.14.1", "2.15.0"])
def test_training_with_the_eager_backend_from_2_14_is_only_unsafe(tmp_path, version):
    text = source("return x + self.lin(x)", tail=EAGER_TRAINING)
    profile = _profile_of(tmp_path, text, version)
    finding = only(RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources)))
    assert finding.safety is Safety.UNSAFE  # inductor's gradient corruption is still on record
    assert "fake_mode" not in notes(finding) and "corrupt the gradients" in notes(finding)


def test_static_mode_gates_on_the_installed_torch():
    finding = only(block("return x + self.lin(x)", tail=EAGER_TRAINING))
    expected = Safety.NONE if torch_release(torch.__version__) < (2, 14) else Safety.UNSAFE
    assert finding.safety is expected


# -- which stacks count ----------------------------------------------------------------------
def test_short_stacks_mixed_stacks_and_marked_blocks_are_left_alone():
    assert block("return x + self.lin(x)", count=3) == []
    mixed = source("return x + self.lin(x)")
    mixed = mixed.replace("nn.ModuleList(Block(8) for _ in range(6))", "nn.Sequential(Block(8), nn.ReLU(), Block(8))")
    assert static(mixed) == []
    marked = source("return x + self.lin(x)")
    marked = marked.replace(
        "    def forward(self, x):\n        return x + self.lin",
        "    @torch.compiler.nested_compile_region\n    def forward(self, x):\n        return x + self.lin",
    )
    assert static(marked) == []


def test_appended_blocks_enumerate_and_a_slice_are_found():
    text = source("return x + self.lin(x)")
    text = text.replace(
        "self.blocks = nn.ModuleList(Block(8) for _ in range(6))",
        "self.blocks = nn.ModuleList()\n        for _ in range(5):\n            self.blocks.append(Block(8))",
    )
    text = text.replace("for block in self.blocks:", "for i, block in enumerate(self.blocks[:4]):")
    finding = only(static(text))
    assert finding.safety is Safety.SAFE and finding.evidence["blocks"] == 5
    assert finding.confidence == "static"
    assert finding.params == {"class": "Block", "function": "forward", "line": first_body_line(text) - 1}


def test_old_or_unknown_torch_gets_no_edit(tmp_path):
    text = source("return x + self.lin(x)")
    sources = write_files(tmp_path, {"model.py": text})
    line = model_forward_line(text)  # Model.forward: the frame that inlines the blocks
    for version, why in [
        ("2.7.1+cpu", "has no torch.compiler.nested_compile_region (added in 2.8)"),
        (None, "the torch version of the Profile is unknown"),
    ]:
        frame = frame_of(name="forward", file="model.py", first_line=line, seconds={"dynamo": 1.5})
        profile = profile_of(frame, command=("python", "model.py"), torch_version=version, sources=sources)
        finding = only(RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources)))
        assert finding.safety is Safety.NONE and why in notes(finding)


def test_a_block_compiled_on_its_own_gets_no_edit(tmp_path):
    """Regional compilation (`block.compile()`): the Profile shows the block's forward as a frame
    of its own; the decorator would not help, and the Profile's word overrides static mode's."""
    text = source("return x + self.lin(x)")
    frames = [
        frame_of(name="forward", file="model.py", first_line=model_forward_line(text), seconds={"dynamo": 1.0}),
        frame_of(
            name="forward", file="model.py", first_line=first_body_line(text) - 1, graph=1, seconds={"dynamo": 0.2}
        ),
    ]
    profile, _ = project_of(tmp_path, {"model.py": text}, *frames)
    finding = only(RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources)))
    assert finding.safety is Safety.NONE and finding.notes[0].startswith("`forward` is compiled as a frame of its own")
    assert only(static(text)).location.line == finding.location.line  # apply keeps the Profile's finding


# -- the rewritten model trains --------------------------------------------------------------
@pytest.mark.slow
def test_training_step_through_the_rewritten_model(tmp_path):
    text = textwrap.dedent("""
        import torch as th
        from torch import nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(8)
                self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

            def forward(self, x):
                return x + self.mlp(self.norm(x))


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block() for _ in range(4)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x
    """)
    source = SourceFile.parse(Path("model.py"), text)
    findings = static(text)
    assert [f.safety for f in findings] == [Safety.SAFE]
    after = rewrite("model.py", source, findings, {"RF004": RF004}).after
    assert "    @th.compiler.nested_compile_region\n    def forward(self, x):\n        return x + self.mlp" in after
    (tmp_path / "model.py").write_text(after)
    spec = importlib.util.spec_from_file_location("rf004_rewritten_model", tmp_path / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    torch.manual_seed(0)
    model = module.Model()
    reference = module.Model()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 8)
    torch._dynamo.reset()
    # aot_eager: the autograd path inductor takes, without code generation. (backend="eager" cannot
    # run backward through the region in torch 2.13: the rule says so.)
    compiled = torch.compile(model, backend="aot_eager")
    loss = compiled(x).pow(2).mean()
    loss.backward()
    expected = reference(x).pow(2).mean()
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
    torch._dynamo.reset()


def test_a_file_without_import_torch_gets_one():
    text = source("return x + self.lin(x)").replace("import torch\nfrom torch import nn", "from torch import nn")
    findings = static(text)
    after = rewrite("model.py", SourceFile.parse(Path("model.py"), text), findings, {"RF004": RF004}).after
    assert after.startswith("\nfrom torch import nn\nimport torch\n")
    assert "    @torch.compiler.nested_compile_region\n    def forward(self, x):" in after


def test_a_file_with_a_byte_order_mark_is_read_like_any_other():
    # ast.parse rejects a leading U+FEFF that CPython and libcst accept: the analysis must not.
    text = source("return x + self.mlp(x)")
    (plain,) = static(text)
    (marked,) = static("\ufeff" + text)
    assert (marked.location.line, marked.location.col, marked.safety) == (
        plain.location.line,
        plain.location.col,
        plain.safety,
    )
    (edit,) = RF004.fix(marked, SourceFile.parse(Path("model.py"), "\ufeff" + text, parse=False), "torch")
    assert edit.new_text.strip() == "@torch.compiler.nested_compile_region"


def test_blocks_the_recorder_saw_in_another_file_are_decorated_there(tmp_path):
    """The stack comes from a parent class's __init__ in backbone.py: the model's own file shows no
    container, the Profile's recorded stack names the block's file, and the decorator goes there."""
    case = ROOT / "golden" / "RF007" / "base_class_other_file"
    for name in ("backbone.py", "program.in.py"):
        shutil.copy(case / name, tmp_path / name.replace(".in", ""))
    profile = Profile.load(case / "profile.json")
    (trained,) = RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert (trained.file, trained.params["class"], trained.safety) == ("backbone.py", "MLPBlock", Safety.NONE)
    assert trained.evidence["container"] == "Regressor.blocks" and trained.evidence["trains"] is True
    # The same program without its training step: the region is offered, in backbone.py.
    program = (tmp_path / "program.py").read_text()
    inference = program.split("optimizer = ")[0] + "with torch.no_grad():\n    train_step(torch.randn(5, 8))\n"
    (tmp_path / "program.py").write_text(inference)
    profile.sources["program.py"] = sha256_bytes(inference.encode())
    (offered,) = RF004.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert (offered.file, offered.safety, offered.location.line) == ("backbone.py", Safety.SAFE, 12)
    edits = RF004.fix(offered, SourceFile.read(tmp_path / "backbone.py"), "torch")
    assert [e.new_text for e in edits] == ["    @torch.compiler.nested_compile_region\n"]


@pytest.mark.slow
def test_the_unsafe_fix_in_training_turns_buffer_reuse_off_and_trains_the_same(tmp_path):
    """`--unsafe-fixes` on a training step under inductor: the region, and
    `allow_buffer_reuse = False` before the block's class (inductor can corrupt a reused region's
    gradients; the bench's rf004_nobufreuse is exact). The weights after two SGD steps equal the
    program's own, each run under inductor as written."""
    case = GOLDEN / "train_inductor"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    shutil.copy(case / "profile.json", tmp_path / "profile.json")
    run_cli("apply", ".", "--profile", "profile.json", "--unsafe-fixes", "--select", "RF004", cwd=tmp_path, check=0)
    text = (tmp_path / "program.py").read_text()
    assert "    @torch.compiler.nested_compile_region\n    def forward" in text
    assert "\ntorch._inductor.config.allow_buffer_reuse = False\n\n\nclass Block(nn.Module):" in text
    save = "\nimport sys\ntorch.save([p.detach() for p in model.parameters()], sys.argv[1])\n"
    weights = {}
    for name, source in (("before", (case / "program.in.py").read_text()), ("after", text)):
        script = tmp_path / f"{name}.py"
        script.write_text(source.replace("model = Net()", "torch.manual_seed(0)\nmodel = Net()") + save)
        done = run_python(script, tmp_path / f"{name}.pt", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        weights[name] = torch.load(tmp_path / f"{name}.pt")
    for before, after in zip(weights["before"], weights["after"]):
        torch.testing.assert_close(after, before)


def test_a_training_script_beside_it_under_the_profiles_eager_backend(tmp_path):
    """Profiled with `--backend eager` (the README's advice): backward through a region fails with
    the eager backend before torch 2.14, so where a training script beside the model makes the
    fix the training one, the Profile's backend decides it too (a trial: `fix --unsafe-fixes`
    blamed the fix for the crash)."""
    text = source("return x + self.lin(x)")
    (finding,) = static(text)
    assert finding.safety is Safety.SAFE
    parsed = SourceFile.parse(Path("model.py"), text)
    honoured = RF004.honour_training(finding, parsed, lambda: "`loss.backward()` at train.py:5", "eager")
    if torch_release(torch.__version__) < (2, 14):
        assert honoured.safety is Safety.NONE and "fake_mode should be enabled for HOPs" in notes(honoured)
    else:
        assert honoured.safety is Safety.UNSAFE and "allow_buffer_reuse = False" in notes(honoured)
    inductor = RF004.honour_training(finding, parsed, lambda: "`loss.backward()` at train.py:5", None)
    assert inductor.safety is Safety.UNSAFE and inductor.evidence["trains"] is True


ONE_BLOCK = """\
import torch
from torch import nn


class Config:
    n_layer = 1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return x + torch.relu(self.fc(x))


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(config.n_layer)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


model = torch.compile(Model(Config()), backend="eager")
for n in (8, 8, 5):
    model(torch.randn(n, 16))
"""


@pytest.mark.slow
@pytest.mark.parametrize("n_layer", [1, 4])
def test_a_run_with_one_block_is_no_finding(tmp_path, n_layer):
    """A trial's model built `range(config.n_layer)` blocks and the run's config had one: RF004
    said [no fix] ("the number of blocks is not a constant in the source"). The recorder now
    records a stack of one, and RF004 (and its static plan of the file) makes no finding; with
    four the finding stays, with the count the run recorded."""
    (tmp_path / "train.py").write_text(ONE_BLOCK.replace("n_layer = 1", f"n_layer = {n_layer}"))
    run_cli("profile", "--", "python", "train.py", cwd=tmp_path, check=0)
    report = run_cli("report", cwd=tmp_path, check=0).stdout
    assert ("RF004" in report) == (n_layer == 4), report
    if n_layer == 4:
        assert "runs 4 `Block` blocks" in report, report
