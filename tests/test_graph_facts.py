"""Facts the run records about sizes, and what the rules do with them (issue 30 causes 1 and 2):
block stacks under a ModuleList of ModuleLists (``up_blocks.0.resnets``) load and are written as
Python reaches them; a size the compile's graph specialised (tied to each head's weight, formatted
into a string) or a swapped parameter gets no mark; parameters of several shapes behind one frame
get their sizes traced as dynamic (torch >= 2.13), or ``isolate_recompiles=True`` (unsafe) where
the program set that option itself."""

import ast
import json
import shutil
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_cli
from equivalence import assert_same_outputs, profile_recorded, run_recorded, total_compiles
from golden_cases import GOLDEN, stage_case
from recompile_fix.analysis.regional import regional_loops
from recompile_fix.analysis.source import SourceFile
from recompile_fix.errors import UserError
from recompile_fix.profile.model import Compile, Profile
from recompile_fix.profile.sources import module_path_code
from recompile_fix.rules.rf001_mark_dynamic.graph_dims import refused_by_run
from recompile_fix.rules.rf001_mark_dynamic.parameter_shapes import _size_held_as_int

HERE = PROGRAMS / "shapes"


def _profile_json(case: str) -> dict:
    return json.loads((GOLDEN / "RF001" / case / "profile.json").read_text())


def _stage(case: str, tmp_path, data: dict | None = None):
    work = tmp_path / case
    work.mkdir()
    shutil.copy(GOLDEN / "RF001" / case / "program.in.py", work / "program.py")
    (work / "profile.json").write_text(json.dumps(data or _profile_json(case)))
    return work


# -- cause 1: block-stack paths through a ModuleList of ModuleLists --------------------------------
def test_block_stack_paths_with_indexes_load():
    data = _profile_json("nested_stages")
    paths = {b["path"] for c in data["frames"][0]["compiles"] for b in c.get("blocks", [])}
    assert paths == {"stages.0", "stages.1"}  # as named_modules() spells them
    Profile.from_json(data)  # was: "damaged Profile: ... 'stages.0', not an attribute path"


@pytest.mark.parametrize("path", ["stages.layer-1", "stages..0", "0.stages", "stages.0x"])
def test_block_stack_paths_that_are_no_module_path_are_damaged(path):
    data = _profile_json("nested_stages")
    data["frames"][0]["compiles"][0]["blocks"][0]["path"] = path
    with pytest.raises(UserError, match="not an attribute path"):
        Profile.from_json(data)


def test_module_path_code_indexes_lists():
    assert module_path_code("up_blocks.0.resnets") == ".up_blocks[0].resnets"
    assert module_path_code("transformer.h") == ".transformer.h"


def test_a_loop_over_an_indexed_stack_is_seen_as_compiling_it():
    source = SourceFile.parse(
        Path("program.py"),
        "for block in model.stages[0]:\n    block.compile()\nfor b in model.other.blocks:\n    b.compile()\n",
    )
    assert [expr for _, expr in regional_loops(source)] == ["model.stages[0]", "model.other.blocks"]


# -- the graph's dims in the Profile -----------------------------------------------------------------
def test_recorded_dims_say_which_size_the_graph_specialised_and_why():
    data = _profile_json("tied_heads")
    compiles = data["frames"][0]["compiles"]
    assert compiles[0]["dims"] == {}  # the first compile traced every size as a constant
    tied = [c["dims"]["args[0]"][0] for c in compiles[1:] if c.get("dims")]
    assert {d["state"] for d in tied} == {"specialized"} and {d["dim"] for d in tied} == {1}
    assert {d["tied"] for d in tied} == {"fn._parameters['weight']"}
    assert sorted(d["size"] for d in tied) == [12, 16, 20, 24, 28, 32, 36]  # each head's in_features
    message = _profile_json("size_in_message")["frames"][0]["compiles"][1]["dims"]
    assert message == {"x": [{"dim": 0, "state": "specialized", "size": 5}]}  # no parameter to blame


def test_profiles_without_dims_still_load_and_damaged_dims_do_not():
    data = _profile_json("tied_heads")
    for compile_ in data["frames"][0]["compiles"]:
        compile_.pop("dims", None)
    assert all(c.dims is None for c in Profile.from_json(data).frames[0].compiles)
    data = _profile_json("tied_heads")
    data["frames"][0]["compiles"][1]["dims"]["args[0]"][0]["state"] = "static"
    with pytest.raises(UserError, match="not dynamic or specialized"):
        Profile.from_json(data)


def test_a_swapped_parameter_or_a_specialised_size_is_refused_with_the_reason():
    compile_ = Compile(id="0/1", dims={"x": [{"dim": 0, "state": "specialized", "size": 5}]})
    assert "specialised it" in refused_by_run([("x", 0)], [compile_])
    assert refused_by_run([("x", 1)], [compile_]) is None  # another dim: nothing recorded against it
    assert refused_by_run([("y", 0)], [Compile(id="0/1", dims={"y": [{"dim": 0, "state": "dynamic"}]})]) is None
    # Specialised at one compile (a prefill, before the cache filled), dynamic at another: the
    # graph serves it dynamic, so the mark stays (golden RF001/cache_object, recorded again).
    dynamic = Compile(id="0/2", dims={"x": [{"dim": 0, "state": "dynamic"}]})
    assert refused_by_run([("x", 0)], [compile_], [compile_, dynamic]) is None
    swapped = refused_by_run([("self._parameters['lora_a']", 0)], [Compile(id="0/1")])
    assert "parameter `self._parameters['lora_a']`" in swapped


# -- cause 2: sizes tied to each wrapper's weight, parameters of other shapes ------------------------
_CONFIG = "torch._dynamo.config.force_parameter_static_shapes = False"


def _with_text(case: str, tmp_path, old: str, new: str):
    """The case staged with ``old`` replaced, line for line, and the Profile's digest to match."""
    return stage_case(GOLDEN / "RF001" / case, tmp_path / case, old, new)


@pytest.mark.parametrize(
    "case, guarded",
    [
        ("tied_heads", "fn._parameters['weight']"),  # the input's width is tied to each weight
        ("heads_of_other_widths", "fn._parameters['bias']"),  # each head's parameters differ in shape
        ("parameter_swap", "self._parameters['lora_a']"),  # one module, its adapter swapped
    ],
)
def test_parameter_shapes_get_dynamic_parameter_sizes_and_no_mark(tmp_path, case, guarded):
    work = _stage(case, tmp_path)
    report = run_cli("report", "profile.json", "--output-format", "full", cwd=work, check=0)
    assert "RF001 [*]" in report.stdout and "per parameter shape" in report.stdout
    assert "mark_dynamic(" not in report.stdout and "isolate_recompiles" not in report.stdout
    assert guarded in report.stdout
    run_cli("apply", ".", "--profile", "profile.json", cwd=work, check=0)
    text = (work / "program.py").read_text()
    assert text == (GOLDEN / "RF001" / case / "program.out.py").read_text()
    assert _CONFIG in text and "mark_dynamic" not in text
    # Once: a second apply finds the lines there.
    again = run_cli("apply", ".", "--profile", "profile.json", "--unsafe-fixes", cwd=work, check=0)
    assert (work / "program.py").read_text() == text, again.stdout


_HEAD = """import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
{held}

class Head(nn.Module):
    def __init__(self, in_dim, width):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, width)
        self.block = Block(width)

    @staticmethod
    def helper(x):
        return x

    def forward(self, x):
        return self.block.fc(F.gelu(self.fc1(x)))
"""


@pytest.mark.parametrize(
    "held, expected",
    [
        ("", None),  # Linear layers only: the options merge every width (8 compiles -> 2)
        ("        self.norm = nn.LayerNorm(width)\n", "`nn.LayerNorm(width)` keeps its size as a Python int"),
        ("        self.norm = nn.LayerNorm(16)\n", None),  # one size for every head
        (
            "        self.width = width\n\n    def forward(self, x):\n        return x.view(-1, self.width)\n",
            "`self.width = width` keeps a size as a Python int its code reads",
        ),
        ("        self.width = width\n", None),  # kept, never read
    ],
)
def test_a_size_a_module_keeps_as_an_int_makes_the_parameter_shapes_fix_unproven(held, expected):
    """Dynamo specialises a module's ints: a head with a `LayerNorm(width)` compiles once per
    width whatever `force_parameter_static_shapes` says (measured on torch 2.14.1: 8 -> 8)."""
    text = _HEAD.format(held=held)
    source = SourceFile.parse(Path("heads.py"), text)
    line = max(i for i, row in enumerate(text.splitlines(), 1) if row == "    def forward(self, x):")  # Head's
    found = _size_held_as_int(source, "forward", line)
    assert (found is None) if expected is None else (found or "").startswith(expected), found
    assert _size_held_as_int(None, "forward", line) is None  # a frame outside the project: no claim


def test_parameter_shapes_are_never_written_for_a_torch_without_the_options(tmp_path):
    data = _profile_json("tied_heads")
    data["torch_version"] = "2.12.0"
    work = _stage("tied_heads", tmp_path, data)
    run_cli("apply", ".", "--profile", "profile.json", "--unsafe-fixes", cwd=work, check=0)
    text = (work / "program.py").read_text()
    assert "force_parameter_static_shapes" not in text and "isolate_recompiles" not in text


def test_where_the_program_sets_parameter_shapes_itself_isolate_recompiles_is_the_unsafe_fix(tmp_path):
    work = _with_text(
        "tied_heads",
        tmp_path,
        "torch.manual_seed(0)\n",
        "torch.manual_seed(0); torch._dynamo.config.force_parameter_static_shapes = True\n",
    )
    report = run_cli("report", "profile.json", cwd=work, check=0)
    assert "[*]" not in report.stdout and "isolate_recompiles=True" in report.stdout
    run_cli("apply", ".", "--profile", "profile.json", "--unsafe-fixes", cwd=work, check=0)
    text = (work / "program.py").read_text()
    assert 'torch.compile(head, backend="eager", isolate_recompiles=True)' in text
    assert "mark_dynamic" not in text and "force_parameter_static_shapes = False" not in text


def test_one_module_whose_parameter_is_swapped_gets_no_isolate_recompiles(tmp_path):
    """A LoRA rank swap: one compiled wrapper, so one cache whatever the option says."""
    work = _with_text(
        "heads_of_other_widths",
        tmp_path,
        'compiled_heads = [torch.compile(head, backend="eager") for head in heads]',
        'compiled_heads = [torch.compile(heads[0], backend="eager")] * 10',  # one wrapper, line for line
    )
    report = run_cli("report", "profile.json", cwd=work, check=0)
    assert "isolate_recompiles" not in report.stdout and "per parameter shape" in report.stdout


@pytest.mark.slow
@pytest.mark.parametrize("case", ["tied_heads", "heads_of_other_widths"])
def test_heads_compile_twice_with_the_same_outputs(tmp_path, case):
    work = _stage(case, tmp_path)
    run_cli("apply", ".", "--profile", "profile.json", cwd=work, check=0)
    shutil.copy(GOLDEN / "RF001" / case / "program.in.py", tmp_path / "before.py")
    before = run_recorded(tmp_path / "before.py", tmp_path)
    after = run_recorded(work / "program.py", tmp_path)
    assert_same_outputs(before, after, exact=True)
    # torch's own count: 8 compiles and a refused attempt at the limit (heads 9 and 10 ran
    # eagerly), then the first head's static graph and one with the width dynamic.
    assert total_compiles(before) == 9 and total_compiles(after) == 2, (before["compiles"], after["compiles"])


# -- pip model code: diffusers UNet2D, and RF007 on a ModuleList of ModuleLists ---------------------
@pytest.mark.slow
def test_unet2d_profile_loads_and_its_ragged_batch_is_fixed(tmp_path):
    shutil.copy(HERE / "unet2d_ragged.py", tmp_path / "program.py")
    _, before = profile_recorded(tmp_path, "program.py", "-o", "profile.json")  # the original's run too
    loaded = Profile.load(tmp_path / "profile.json")
    paths = {s.path for f in loaded.frames for s in f.block_stacks}
    assert "up_blocks.0.resnets" in paths  # a ModuleList of ModuleLists
    report = run_cli("report", "profile.json", cwd=tmp_path, check=0)
    assert report.returncode == 0, report.stderr
    run_cli("apply", ".", "--profile", "profile.json", cwd=tmp_path, check=0)
    after_text = (tmp_path / "program.py").read_text()
    assert "mark_dynamic(batch, 0)" in after_text, after_text
    after = run_recorded(tmp_path / "program.py", tmp_path)
    assert_same_outputs(before, after)
    assert total_compiles(before) == 2 and total_compiles(after) == 1, (before["compiles"], after["compiles"])


@pytest.mark.slow
def test_rf007_writes_indexed_stacks_as_python(tmp_path):
    shutil.copy(HERE / "deep_stages.py", tmp_path / "program.py")
    _, before = profile_recorded(tmp_path, "program.py", "-o", "profile.json")  # the original's run too
    run_cli("apply", ".", "--profile", "profile.json", "--unsafe-fixes", "--select", "RF007", cwd=tmp_path, check=0)
    text = (tmp_path / "program.py").read_text()
    ast.parse(text)  # was: `for block in model.stages.0:`, a syntax error
    assert "for block in model.stages[0]:\n    block.compile(" in text and "model.stages[1]" in text
    after = run_recorded(tmp_path / "program.py", tmp_path)
    assert_same_outputs(before, after, of="globals")


@pytest.mark.slow
def test_after_the_parameter_fix_the_one_recompile_left_is_expected(tmp_path):
    shutil.copy(GOLDEN / "RF001" / "heads_of_other_widths" / "program.out.py", tmp_path / "program.py")
    run_cli("profile", "-o", "profile.json", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    report = run_cli("report", "profile.json", cwd=tmp_path, check=0)
    assert "2 compiles, 1 recompiles" in report.stdout, report.stdout
    assert "RF001" not in report.stdout and "0 with no fix (why given), 1 expected" in report.stdout


@pytest.mark.slow
def test_a_mark_that_the_dynamic_graph_itself_rules_out_is_not_offered(tmp_path):
    """A new user's trial: `[*]` RF001 marked a progressively resized image (32, 40, 48, 56) and
    the program compiled twice as before (a 1x1 feature map at 32 is specialised). The recorder
    holds the dynamic graph's guards against the earlier compiles' sizes (`excludes`); RF001
    offers no mark, and says why."""
    from recompile_fix.analysis.project import Project
    from recompile_fix.findings.finding import Safety
    from recompile_fix.rules import rule_by_id

    shutil.copy(PROGRAMS / "sizes" / "progressive_resize.py", tmp_path / "train.py")
    run_cli("profile", "--", "python", "train.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (frame,) = profile.frames
    dims = frame.compiles[1].dims or {}
    assert [d.get("excludes") for d in dims["args[0]"]] == [[32], [32]], dims
    # The guard that rejects it, in the sizes' names (a trial's CNN: inductor's `x.size()[0] < 16`
    # was told as a 0/1 specialisation, a guess): here a size derived from the image's is >= 2.
    guards = [d.get("excluded_by") for d in dims["args[0]"]]
    assert all(g and "args[0].size()[" in g for g in guards), guards
    (finding,) = rule_by_id("RF001").plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.safety is Safety.NONE
    assert "guards reject the size 32 an earlier call took (`" in finding.notes[0], finding.notes
    assert guards[0] in finding.notes[0], finding.notes


def test_a_dynamic_graph_that_rejects_several_earlier_sizes_leaves_the_mark_to_a_run():
    """A trial's wav2vec2 on clips of 4000, 6400 and then longer samples: the dynamic graph's guard
    (`32*(n//10) - 32 > 20480`) rejects both earlier sizes, and RF001 said "no fewer compiles";
    marked from the first call the two share one graph (3 -> 2, `fix` kept it). One size rejected
    stays refused: a graph per side, as before."""
    from recompile_fix.profile.model import Compile
    from recompile_fix.rules.rf001_mark_dynamic.graph_dims import refused_by_run, split_by_run

    guard = "32*((input_values.size()[1]//10)) - 32 > 20480"
    record = {"dim": 1, "state": "dynamic", "excludes": [4000, 6400], "excluded_by": guard}
    compiles = [Compile(id="0/0"), Compile(id="0/1"), Compile(id="0/2", dims={"input_values": [record]})]
    group = [("input_values", 1)]
    assert refused_by_run(group, compiles, compiles) is None
    note = split_by_run(group, compiles, compiles)
    assert note is not None and note.startswith("unproven: compile 0/2") and "4000, 6400" in note and guard in note
    one = [Compile(id="0/0"), Compile(id="0/1", dims={"input_values": [{**record, "excludes": [4000]}]})]
    assert "no fewer compiles" in (refused_by_run(group, one, one) or "")
    assert split_by_run(group, one, one) is None
