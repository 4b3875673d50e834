"""RF007 regional-compile beyond the golden cases: the compile statements it replaces and those it
leaves, where it finds the blocks (ModuleDict, Sequential, property, parent class, a pip
package's model through the Profile), the reasons it gives no edit, the RF004/RF007 choice, and
that a second apply changes nothing."""

import hashlib
import importlib.util
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, run_python
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.regional import compile_sites
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.rewrite import rewrite
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.pipeline.fix import merge_findings
from recompile_fix.profile.model import Profile
from recompile_fix.rules import rule_by_id

RF004 = rule_by_id("RF004")
RF007 = rule_by_id("RF007")
RULES = {"RF004": RF004, "RF007": RF007}

MODEL = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width{init_params}):
        super().__init__()
        self.fc = nn.Linear(width, width){init}

    def forward(self, x{params}):
{body}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{build}

    def forward(self, x{params}):
{loop}
        return x
"""

LOOP = "        for block in self.blocks:\n            x = block(x)"


def model(
    *,
    body="return x + self.fc(x)",
    build="self.blocks = nn.ModuleList(Block(8) for _ in range(6))",
    loop=LOOP,
    init_params="",
    init="",
    params="",
    program="net = Model()\ncompiled = torch.compile(net)\ncompiled(torch.randn(2, 8))\n",
) -> str:
    return (
        MODEL.format(
            body=textwrap.indent(body, " " * 8),
            build=textwrap.indent(build, " " * 8),
            loop=loop,
            init_params=init_params,
            init=init,
            params=params,
        )
        + "\n\n"
        + program
    )


def static(text: str, path: str = "model.py") -> list[Finding]:
    source = SourceFile.parse(Path(path), text)
    return merge_findings(RF004.plan_static(source, path), RF007.plan_static(source, path))


def alone(text: str, path: str = "model.py") -> list[Finding]:
    """RF007 by itself (no choice against RF004): what it finds and how it edits."""
    return RF007.plan_static(SourceFile.parse(Path(path), text), path)


def rf007(findings: list[Finding]) -> Finding:
    (found,) = [f for f in findings if f.rule == "RF007"]
    return found


def rf004(findings: list[Finding]) -> Finding:
    (found,) = [f for f in findings if f.rule == "RF004"]
    return found


def notes(finding: Finding) -> str:
    return " ".join(finding.notes)


def applied(text: str, findings: list[Finding], path: str = "model.py") -> str:
    chosen = [f for f in findings if f.fixable]
    return rewrite(path, SourceFile.parse(Path(path), text), chosen, RULES).after


# -- the compile statements ------------------------------------------------------------------
def test_compile_sites_the_three_spellings_and_what_is_left_alone():
    text = textwrap.dedent("""
        import re
        import torch as th

        def step(x):
            return x

        compiled = th.compile(model, mode="max-autotune", fullgraph=True)
        model.compile(dynamic=False)
        self.model = th.compile(self.model)
        fn = th.compile(step)
        fwd = th.compile(model.forward)
        wrapped = DDP(th.compile(model))
        pattern = re.compile("x")

        class Net:
            @th.compile(backend="eager")
            def forward(self, x):
                return x
    """)
    sites = compile_sites(SourceFile.parse(Path("p.py"), text))
    assert [(s.kind, s.module, s.target, s.keywords) for s in sites] == [
        ("call", "model", "compiled", ['mode="max-autotune"', "fullgraph=True"]),
        ("method", "model", None, ["dynamic=False"]),
        ("call", "self.model", "self.model", []),
        ("decorator", "Net", None, ['backend="eager"']),
    ]


# -- where the blocks are --------------------------------------------------------------------
@pytest.mark.parametrize(
    "build, loop, path",
    [
        (  # nanoGPT: a ModuleList inside a ModuleDict
            "self.transformer = nn.ModuleDict(dict(h=nn.ModuleList([Block(8) for _ in range(6)]), ln=nn.LayerNorm(8)))",
            "        for block in self.transformer.h:\n            x = block(x)",
            "transformer.h",
        ),
        (  # the same, spelled with a dict literal and a subscript
            'self.transformer = nn.ModuleDict({"h": nn.ModuleList([Block(8) for _ in range(6)])})',
            '        for block in self.transformer["h"]:\n            x = block(x)',
            "transformer.h",
        ),
        (  # an nn.Sequential from a comprehension, called whole
            "self.blocks = nn.Sequential(*[Block(8) for _ in range(6)])",
            "        x = self.blocks(x)",
            "blocks",
        ),
    ],
)
def test_stacks_are_found_where_models_keep_them(build, loop, path):
    text = model(build=build, loop=loop)
    finding = rf007(alone(text))
    assert finding.params["paths"] == [path], finding.params
    assert f"for block in net.{path}:\n    block.compile()\ncompiled = net\n" in applied(text, [finding])


def test_behind_a_property_and_in_a_parent_class_of_the_file():
    text = model(
        build="self.head = nn.Linear(8, 8)",
        loop="        for block in self.layers:\n            x = block(x)",
    ).replace(
        "class Model(nn.Module):",
        "class Base(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self._stack = nn.ModuleList(Block(8) for _ in range(6))\n\n    @property\n"
        "    def layers(self):\n        return self._stack\n\n\nclass Model(Base):",
    )
    finding = rf007(alone(text))
    assert finding.params["paths"] == ["_stack"]
    # a submodule's stack: the path goes through it
    wrapped = (
        text
        + "\n\nclass Wrapper(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        + (
            "        self.model = Model()\n\n    def forward(self, x):\n        return self.model(x)\n\n\n"
            "w = Wrapper()\nw.compile()\n"
        )
    )
    paths = [f.params["paths"] for f in alone(wrapped)]
    assert ["model._stack"] in paths


def test_a_training_program_gets_rf007_and_rf004_says_why_not():
    text = model(program="net = Model()\nstep = torch.compile(net)\nstep(torch.randn(2, 8)).sum().backward()\n")
    findings = static(text)
    assert rf007(findings).safety is Safety.UNSAFE and rf007(findings).evidence["trains"]
    assert rf004(findings).safety is Safety.NONE
    assert notes(rf004(findings)).startswith("RF007 compiles these blocks one by one instead (model.py:")
    after = applied(text, findings)
    assert (
        "nested_compile_region" not in after and "for block in net.blocks:\n    block.compile()\nstep = net\n" in after
    )


def test_inference_with_a_safe_region_keeps_rf004():
    findings = static(
        model(program="net = Model().eval()\nnet.compile()\nwith torch.no_grad():\n    net(torch.ones(1, 8))\n")
    )
    assert rf004(findings).safety is Safety.SAFE
    assert rf007(findings).safety is Safety.NONE and "RF004 marks `Block.forward`" in notes(rf007(findings))
    # static mode times nothing: the choice keeps the whole-model compile's steady state
    assert "no steady-state call of the compiled model was timed" in notes(rf007(findings))


@pytest.mark.parametrize(
    "steady_ms, chosen, words",
    [
        (100.0, "RF007", "the profiled steady-state call took 100.0 ms, to which 6 block boundaries add about 0.3%"),
        (
            1.0,
            "RF004",
            "to which 6 block boundaries would add about 27.0% (15 us for each of the 18 graph inputs they pass",
        ),
        (None, "RF004", "no steady-state call of the compiled model was timed"),
    ],
)
def test_inference_weighs_the_block_boundaries_against_the_profiled_step(steady_ms, chosen, words):
    """RF007 compiles faster; what it costs is time at each block boundary (about 15 us for each
    tensor a block takes), which counts against the model's steady-state call as the Profile
    timed it."""
    text = model(
        program="net = Model().eval()\ncompiled = torch.compile(net)\nwith torch.no_grad():\n    compiled(torch.ones(1, 8))\n"
    )
    source = SourceFile.parse(Path("model.py"), text)
    regional = RF007.plan_static(source, "model.py")
    (found,) = regional
    found.evidence["blocks"] = 6
    found.evidence["boundary_inputs"] = 18  # a Linear's weight and bias, and forward's `x`
    if steady_ms is not None:
        found.evidence["steady_ms"] = steady_ms
    findings = merge_findings(RF004.plan_static(source, "model.py"), regional)
    winner, loser = (rf007, rf004) if chosen == "RF007" else (rf004, rf007)
    assert winner(findings).fixable and loser(findings).safety is Safety.NONE
    assert words in notes(loser(findings))


def test_inference_keeps_an_unsafe_region_too_and_rf007_alone_is_unsafe():
    text = model(body="return x + helper(self.fc(x))").replace(
        "from torch import nn", "from torch import nn\nfrom helpers import helper"
    )
    findings = static(text)
    assert rf004(findings).safety is Safety.UNSAFE
    assert rf007(findings).safety is Safety.NONE and "RF004 marks `Block.forward`" in notes(rf007(findings))
    (regional,) = alone(text)
    assert regional.safety is Safety.UNSAFE
    assert (
        "for inference the steady state is what the compile pays for: each block boundary adds about 15 us a call"
        in notes(regional)
    )


def test_a_second_apply_changes_nothing_either_way():
    for program in (
        "net = Model()\nstep = torch.compile(net)\nstep(torch.randn(2, 8)).sum().backward()\n",  # RF007
        "net = Model().eval()\nnet.compile()\n",  # RF004
    ):
        text = model(program=program)
        once = applied(text, static(text))
        assert once != text
        assert [f for f in static(once) if f.fixable] == [], [f.describe() for f in static(once)]


# -- no edit, or unsafe ----------------------------------------------------------------------
def test_a_per_layer_cache_gets_no_edit_unless_the_program_turns_it_off():
    kwargs = dict(
        init_params=", layer_idx",
        init="\n        self.layer_idx = layer_idx",
        params=", cache=None",
        body="if cache is not None:\n    x = cache.update(x, self.layer_idx)\nreturn x + self.fc(x)",
        build="self.blocks = nn.ModuleList(Block(8, i) for i in range(6))",
        loop="        for block in self.blocks:\n            x = block(x, cache)",
    )
    blocked = rf007(static(model(**kwargs)))
    assert blocked.safety is Safety.NONE
    assert "updates a key/value cache per layer (`cache.update(...)` (line" in notes(blocked)
    assert "decoding needs the cache, so the whole-model compile stays" in notes(blocked)
    kwargs["program"] = "net = Model()\ncompiled = torch.compile(net)\ncompiled(torch.randn(2, 8)).sum().backward()\n"
    training = rf007(static(model(**kwargs)))
    assert training.safety is Safety.NONE and "pass `use_cache=False` to the model (training" in notes(training)
    kwargs["program"] = "net = Model()\ncompiled = torch.compile(net)\ncompiled(torch.randn(2, 8), use_cache=False)\n"
    allowed = rf007(alone(model(**kwargs)))
    assert "the program passes `use_cache=False` (model.py:" in notes(allowed)
    assert allowed.safety is Safety.UNSAFE  # and it reads the index in its forward
    assert "built with their index and their forward reads `self.layer_idx`" in notes(allowed)


@pytest.mark.parametrize(
    "program, why",
    [
        (
            "net = Model()\ncompiled = torch.compile(net)\ntorch.save(compiled.state_dict(), 'w.pt')\n",
            "the program uses `state_dict`",
        ),
        ("net = Model()\ncompiled = torch.compile(net)\nprint(compiled._orig_mod)\n", "the program uses `_orig_mod`"),
    ],
)
def test_reading_the_wrapper_is_unsafe(program, why):
    finding = rf007(alone(model(program=program)))
    assert finding.safety is Safety.UNSAFE and why in notes(finding)


def test_a_per_layer_function_and_an_old_torch_get_no_edit():
    text = model(loop="        for block in self.blocks:\n            x = run(block, x)").replace(
        "class Model(", "def run(layer, x):\n    return layer.fc(x)\n\n\nclass Model("
    )
    finding = rf007(alone(text))
    assert finding.safety is Safety.NONE and "runs its blocks through `run(...)`" in notes(finding)


def test_the_decorator_moves_to_the_block_or_says_why_not():
    text = model(program="").replace(
        "    def forward(self, x):\n        for block",
        '    @torch.compile(mode="default")\n    def forward(self, x):\n        for block',
    )
    finding = rf007(alone(text))
    after = applied(text, [finding])
    assert '    @torch.compile(mode="default")\n    def forward(self, x):\n        return x + self.fc(x)' in after
    assert "        for block in self.blocks:" in after and after.count("torch.compile") == 1


def test_edits_keep_line_endings_comments_and_free_names():
    text = model(program="net = Model()\ncompiled = torch.compile(net)  # fast\n").replace("\n", "\r\n")
    after = applied(text, alone(text))
    assert "for block in net.blocks:\r\n    block.compile()\r\ncompiled = net  # fast\r\n" in after
    shadow = model(program="block = 3\nnet = Model()\nnet.compile()\nprint(block)\n")
    assert "for layer in net.blocks:\n    layer.compile()\n" in applied(shadow, alone(shadow))
    shared = model(program="net = Model(); net.compile()\n")
    assert applied(shared, alone(shared)) == shared  # not a line of its own: no edit


# -- through the Profile ---------------------------------------------------------------------
def test_the_recorded_stacks_find_a_parent_class_in_another_file(tmp_path):
    case = ROOT / "golden" / "RF007" / "base_class_other_file"
    profile = Profile.load(case / "profile.json")
    (stack,) = [s for f in profile.frames for s in f.block_stacks]
    assert (stack.path, stack.block, stack.file, stack.count) == ("blocks", "MLPBlock", "backbone.py", 4)
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    shutil.copy(case / "backbone.py", tmp_path / "backbone.py")
    findings = RF007.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    (finding,) = findings
    assert finding.safety is Safety.UNSAFE and finding.params["paths"] == ["blocks"]
    assert RF007.plan_static(SourceFile.read(tmp_path / "program.py"), "program.py") == []  # the file alone cannot tell


WRAPPED = """
import functools

import torch
from torch import nn


def logged(forward):
    @functools.wraps(forward)
    def wrapper(*args, **kwargs):
        return forward(*args, **kwargs)

    return wrapper


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return x + self.fc(x)


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.ModuleDict({"layers": nn.ModuleList([Layer() for _ in range(5)])})

    @logged
    def forward(self, x):
        for layer in self.inner["layers"]:
            x = layer(x)
        return x


stack = Stack()
compiled = torch.compile(stack)
compiled(torch.randn(2, 4)).sum().backward()
"""


@pytest.mark.slow
def test_the_recorder_sees_stacks_through_a_decorators_wrapper(tmp_path):
    """transformers wraps forward in `wrapped_func(*args, **kwargs)`: the module is args[0]."""
    (tmp_path / "program.py").write_text(WRAPPED)
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = profile.frames
    assert frame.name == "wrapper"
    (stack,) = frame.block_stacks
    assert (stack.path, stack.count, stack.block, stack.argument, stack.owner) == (
        "inner.layers",
        5,
        "Layer",
        "self",
        "Stack",
    )
    run_cli("apply", ".", "--unsafe-fixes", cwd=tmp_path, check=0)
    assert (
        "for block in stack.inner.layers:\n    block.compile()\ncompiled = stack\n"
        in (tmp_path / "program.py").read_text()
    )


LLAMA = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
torch.manual_seed(0)
model = LlamaForCausalLM(config)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model = torch.compile(model{backend})
losses = []
for step in range(2):
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(step))
    loss = model(input_ids=ids, labels=ids{cache}).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
from torch._dynamo.utils import get_compilation_metrics
print(losses, len(get_compilation_metrics()))
"""


@pytest.mark.slow
def test_a_pip_packages_model_is_compiled_by_its_layers_in_the_users_file(tmp_path):
    """transformers' Llama, trained: the layers live in site-packages, the edit goes where the
    program compiled the model; the same losses, one compile for the four layers. With the
    cache left on, each layer would compile on its own: no edit."""
    (tmp_path / "train.py").write_text(LLAMA.format(backend=', backend="eager"', cache=", use_cache=False"))
    (tmp_path / "cached.py").write_text(LLAMA.format(backend=', backend="eager"', cache=""))
    library = Path(importlib.util.find_spec("transformers.models.llama.modeling_llama").origin)
    library_hash = hashlib.sha256(library.read_bytes()).hexdigest()
    before = run_python("train.py", cwd=tmp_path)
    assert before.returncode == 0, before.stderr[-3000:]
    run_cli("profile", "-o", "train.json", "--", "python", "train.py", cwd=tmp_path, check=0)
    run_cli("profile", "-o", "cached.json", "--", "python", "cached.py", cwd=tmp_path, check=0)
    # Only the program's own file is planned for an edit (the layers' file is transformers').
    listed = run_cli(
        "apply", ".", "--profile", "train.json", "--check", "--unsafe-fixes", "--output-format", "json", cwd=tmp_path
    )
    assert [(f["code"], Path(f["filename"]).name) for f in json.loads(listed.stdout)] == [("RF007", "train.py")]
    result = run_cli("apply", ".", "--profile", "train.json", "--unsafe-fixes", cwd=tmp_path, check=0)
    text = (tmp_path / "train.py").read_text()
    assert 'for block in model.model.layers:\n    block.compile(backend="eager")\n' in text, result.stderr
    assert hashlib.sha256(library.read_bytes()).hexdigest() == library_hash
    after = run_python("train.py", cwd=tmp_path)
    assert after.returncode == 0, after.stderr[-3000:]
    losses_before, compiles_before = before.stdout.strip().rsplit(" ", 1)
    losses_after, compiles_after = after.stdout.strip().rsplit(" ", 1)
    assert losses_after == losses_before and (compiles_before, compiles_after) == ("1", "1")
    check = run_cli("apply", "cached.py", "--profile", "cached.json", "--check", cwd=tmp_path, check=0)
    assert "RF007 [no fix]" in check.stdout and "each layer would compile on its own" in check.stdout
    assert (tmp_path / "cached.py").read_text() == LLAMA.format(backend=', backend="eager"', cache="")


STEADY = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.relu(self.fc(x))


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(6))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


torch.manual_seed(0)
net = Model({width}).eval()
compiled = torch.compile(net)
with torch.no_grad():
    for step in range(4):
        compiled(torch.randn({rows}, {width}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "width, rows, chosen",
    [
        (512, 1024, "RF007"),  # ~0.5 GFLOP a block: the six boundaries are well under 1% of a call
        (8, 2, "RF004"),  # a few microseconds a block: the boundaries would double the call
    ],
)
def test_the_profile_times_the_steady_state_that_chooses_for_inference(tmp_path, width, rows, chosen):
    """The recorder times the calls of `torch.compile(net)` that compiled nothing (three of four)
    and the choice follows: big blocks get RF007, small ones RF004."""
    (tmp_path / "program.py").write_text(STEADY.format(width=width, rows=rows))
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = profile.frames
    assert frame.name == "forward" and frame.steady is not None and frame.steady.calls == 3
    assert frame.steady.seconds > 0 and frame.steady.cpu_seconds is not None and frame.steady.cpu_seconds > 0
    (stack,) = frame.block_stacks
    assert stack.graph_inputs == 3  # one block's Linear (weight and bias) and forward's `x`
    listed = run_cli("apply", ".", "--check", "--unsafe-fixes", "--output-format", "json", cwd=tmp_path)
    fixes = {f["code"]: f for f in json.loads(listed.stdout)}
    assert fixes[chosen]["fix"] is not None, fixes
    other = "RF004" if chosen == "RF007" else "RF007"
    assert fixes[other]["fix"] is None


# -- a block whose forward is inherited ------------------------------------------------------
TRAINS = "net = Model()\ncompiled = torch.compile(net)\ncompiled(torch.randn(2, 8)).sum().backward()\n"
INHERITED = (
    model(program=TRAINS)
    .replace(
        "class Block(nn.Module):",
        "class Base(nn.Module):",
    )
    .replace("\n\nclass Model(", "\n\nclass Block(Base):\n    pass\n\n\nclass Model(", 1)
)


def test_a_block_that_inherits_its_forward_from_the_file_is_checked_there():
    """`class Block(Base): pass`: the forward that runs is Base's, checked as the block's own
    (this crashed RF007 on an assertion before)."""
    own = rf007(static(model(program=TRAINS)))
    found = rf007(static(INHERITED))
    assert found.safety is own.safety and "outside this file" not in notes(found)
    assert "for block in net.blocks:\n    block.compile()\n" in applied(INHERITED, static(INHERITED))


def test_a_block_that_inherits_its_forward_from_a_library_is_a_risk_named():
    text = INHERITED.replace("class Block(Base):", "class Block(nn.TransformerEncoderLayer):").replace(
        "Block(8)", "Block(8, 2)"
    )
    found = rf007(static(text))
    assert found.safety is Safety.UNSAFE
    assert "`Block` inherits its forward from a class outside this file" in notes(found)
