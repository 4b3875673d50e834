"""Classes by identity, not by name (issue 32, item 6): two files each define `class Net`, only one
is compiled and recompiles on an int counter (RF006's case). The recorder records the module's
class (``qualname``, and the Profile its file, ``defined_in``); RF006 edits that class only, and a
second `apply` (the fixed file no longer the one profiled) finds nothing in the other file. An
older Profile, without the record, falls back to names only where one class of the project
assigns the counter.

The quick tests use hand-built Profiles; the slow one profiles the two-file program with torch.
"""

import json
import shutil
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from conftest import run_cli
from equivalence import assert_same_outputs, run_recorded
from recompile_fix.analysis.block_stacks import Site
from recompile_fix.analysis.classes import ClassIndex, qualified_classes
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.regional import StackRef
from recompile_fix.analysis.source import SourceFile
from recompile_fix.errors import UserError
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.model import BlockStack, Compile, Frame, Location, Profile, Reason, sha256_bytes
from recompile_fix.rules import rule_by_id
from recompile_fix.rules.rf004_nested_compile_region.rule import _recorded_count
from recompile_fix.rules.rf007_regional_compile.rule import _decorator_target_problem

RF006 = rule_by_id("RF006")

COMPILED_NET = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x * self.step
"""

# The driver defines its own `class Net`, with a counter of the same name, never compiled.
MAIN = """\
import torch
from torch import nn

import a


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x + self.step


net = torch.compile(a.Net())
other = Net()
for _ in range(5):
    y = net(torch.ones(3))
    z = other(torch.ones(3))
print(y, z)
"""

# The compiled step is a function of main.py; the module it calls is a global built from a.py's
# class, and main.py has a `class Net` of its own.
MAIN_GLOBAL = """\
import torch
from torch import nn

import a as models


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return x + self.step


model = models.Net()
other = Net()


@torch.compile
def train_step(x):
    return model(x)


for _ in range(5):
    y = train_step(torch.ones(3))
    z = other(torch.ones(3))
print(y, z)
"""

X = {"type": "Tensor", "shape": [3], "stride": [1], "dtype": "float32", "device": "cpu"}


def _frame(file, name, first_line, source, use_line, inputs, site):
    compiles = [Compile(id="0/0", stack=[site], inputs=inputs)]
    for n in range(4):
        compiles.append(
            Compile(
                id=f"0/{n + 1}",
                stack=[site],
                inputs=inputs,
                reasons=[
                    Reason(
                        kind="module_attribute",
                        text=f"0/{n}: {source} == {n}",
                        source=source,
                        value=n,
                        value_type="int",
                        first_use=Location(file=file, line=use_line, function="forward"),
                    )
                ],
            )
        )
    return Frame(file=file, first_line=first_line, name=name, compiles=compiles)


def _module(root: Path, file: str, qualname: str, recorded: bool) -> dict:
    entry = {"type": "Module", "class": qualname.rsplit(".", 1)[-1], "file": str(root / file)}
    if recorded:  # what this recorder writes; an older one wrote neither field
        entry.update({"qualname": qualname, "defined_in": file})
    return entry


def _project(root: Path, files: dict[str, str], frames: list[Frame]) -> Profile:
    for name, text in files.items():
        (root / name).write_text(text)
    profile = Profile(
        command=["python", "main.py"],
        torch_version="2.13.0+cpu",
        python_version="3.11.7",
        frames=frames,
        sources={name: sha256_bytes(text.encode()) for name, text in files.items()},
    )
    profile.dump(root / ".recompile-fix" / "profile.json")
    return profile


def _texts(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.glob("*.py"))}


def _apply_twice(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    before = _texts(root)
    first = run_cli("apply", ".", cwd=root, check=0)
    once = _texts(root)
    assert once != before, first.stdout + first.stderr
    second = run_cli("apply", ".", cwd=root, check=0)
    said = second.stdout + second.stderr
    assert _texts(root) == once, "a second apply edited again:\n" + said
    assert "Fixed 0 finding(s)" in said and "RF006" not in said, said
    run_cli("apply", "--check", ".", cwd=root, check=0)
    return before, once


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older_profile"])
def test_only_the_compiled_files_class_is_edited_and_a_second_apply_finds_nothing(tmp_path, recorded):
    inputs = {"self": _module(tmp_path, "a.py", "Net", recorded), "self.step": {"type": "int", "value": 1}, "x": X}
    frame = _frame("a.py", "forward", 10, "self.step", 11, inputs, Location("main.py", 20, function="<module>"))
    _project(tmp_path, {"a.py": COMPILED_NET, "main.py": MAIN}, [frame])
    before, once = _apply_twice(tmp_path)
    assert once["main.py"] == before["main.py"]
    if recorded:
        # Its exact type known, main.py's `self.step = 0` is another object's: no reason left
        # against the buffer (an older Profile counts it, and makes the counter dynamic instead).
        assert 'self.register_buffer("step", torch.tensor(0), persistent=False)' in once["a.py"]
    else:
        assert "dynamic_sources = \"L['self'].step\"" in once["a.py"]


def test_the_driver_files_class_is_the_one_compiled(tmp_path):
    """The mirror: main.py's Net is the compiled one; a.py's, imported but run eagerly, stays."""
    main = MAIN.replace("torch.compile(a.Net())", "a.Net()").replace("other = Net()", "other = torch.compile(Net())")
    main = main.replace("y = net(", "y = other(").replace("z = other(", "z = net(")
    inputs = {"self": _module(tmp_path, "main.py", "Net", True), "x": X}
    frame = _frame("main.py", "forward", 12, "self.step", 13, inputs, Location("main.py", 20, function="<module>"))
    _project(tmp_path, {"a.py": COMPILED_NET, "main.py": main}, [frame])
    before, once = _apply_twice(tmp_path)
    assert once["a.py"] == before["a.py"]
    assert 'self.register_buffer("step", torch.tensor(0), persistent=False)' in once["main.py"]


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older_profile"])
def test_a_global_module_is_the_class_its_constructor_names(tmp_path, recorded):
    """`G['model'].step`: `model = models.Net()` names a.py's class through the import, not
    main.py's `Net` (the recorder does not walk globals: this holds for every Profile)."""
    frame = _frame("main.py", "train_step", 21, "G['model'].step", 11, {"x": X}, Location("main.py", 27))
    for compile_ in frame.compiles:
        for reason in compile_.reasons:
            reason.first_use = Location(file="a.py", line=11, function="forward")
    _project(tmp_path, {"a.py": COMPILED_NET, "main.py": MAIN_GLOBAL}, [frame])
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    (finding,) = RF006.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.file == "a.py" and finding.safety is Safety.SAFE, finding.notes
    before, once = _apply_twice(tmp_path)
    assert once["main.py"] == before["main.py"]
    assert 'self.register_buffer("step", torch.tensor(0), persistent=False)' in once["a.py"]


MAIN_WRAPPER = MAIN.replace(
    "net = torch.compile(a.Net())",
    "class Wrapper(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = a.Net()\n\n"
    "    def forward(self, x):\n        return self.inner(x)\n\n\nnet = torch.compile(Wrapper())",
)


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older_profile"])
def test_a_submodule_is_the_class_its_holder_builds(tmp_path, recorded):
    """`self.inner.step` in compiled `Wrapper.forward`: `self.inner = a.Net()` names a.py's class,
    not main.py's `Net` (the recorder does not walk submodules)."""
    inputs = {"self": _module(tmp_path, "main.py", "Wrapper", recorded), "x": X}
    line = MAIN_WRAPPER.splitlines().index("    def forward(self, x):", 15) + 1
    frame = _frame("main.py", "forward", line, "self.inner.step", 11, inputs, Location("main.py", 29))
    for compile_ in frame.compiles:
        for reason in compile_.reasons:
            reason.first_use = Location(file="a.py", line=11, function="forward")
    _project(tmp_path, {"a.py": COMPILED_NET, "main.py": MAIN_WRAPPER}, [frame])
    before, once = _apply_twice(tmp_path)
    assert once["main.py"] == before["main.py"]
    if recorded:  # Wrapper's exact type known, so a.Net's: main.py's `self.step = 0` is another's
        assert 'self.register_buffer("step", torch.tensor(0), persistent=False)' in once["a.py"]
    else:
        assert "dynamic_sources = \"L['self'].inner.step\"" in once["a.py"]


def test_a_recorded_class_whose_file_changed_is_not_taken_for_another(tmp_path):
    """The fixed file no longer the one profiled: no finding edits main.py's Net, and what is
    said about a.py's is said in a.py (which apply, having fixed it, keeps quiet about)."""
    inputs = {"self": _module(tmp_path, "a.py", "Net", True), "x": X}
    frame = _frame("a.py", "forward", 10, "self.step", 11, inputs, Location("main.py", 20))
    profile = _project(tmp_path, {"a.py": COMPILED_NET, "main.py": MAIN}, [frame])
    (tmp_path / "a.py").write_text(COMPILED_NET.replace("self.step = 0", "self.step = 0  # edited"))
    (finding,) = RF006.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.safety is Safety.NONE and finding.file == "a.py"
    assert "a.py changed since it was profiled" in finding.notes[0], finding.notes


def test_a_recorded_class_missing_from_its_file_is_no_fix(tmp_path):
    inputs = {"self": _module(tmp_path, "a.py", "Gone", True), "x": X}
    frame = _frame("a.py", "forward", 10, "self.step", 11, inputs, Location("main.py", 20))
    profile = _project(tmp_path, {"a.py": COMPILED_NET, "main.py": MAIN}, [frame])
    (finding,) = RF006.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.safety is Safety.NONE and "cannot find `class Gone` in a.py" in finding.notes[0]


def test_two_compiled_classes_of_one_name_are_two_counters(tmp_path):
    """Both files' `Net` compiled, each recompiling on its own `step`: one fix in each file."""
    b = COMPILED_NET.replace("x * self.step", "x - self.step")
    frames = [
        _frame(f, "forward", 10, "self.step", 11, {"self": _module(tmp_path, f, "Net", True), "x": X}, Location(f, 1))
        for f in ("a.py", "b.py")
    ]
    profile = _project(tmp_path, {"a.py": COMPILED_NET, "b.py": b}, frames)
    findings = RF006.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert sorted((f.file, f.safety) for f in findings) == [("a.py", Safety.SAFE), ("b.py", Safety.SAFE)]


# -- the pieces ---------------------------------------------------------------------------------
NESTED = """\
class Net:
    class Block:
        pass


def build():
    if True:
        class Net:
            pass
    return Net


class Net:
    pass
"""


def test_classes_by_qualified_name(tmp_path):
    (tmp_path / "m.py").write_text(NESTED)
    found = qualified_classes(cst.parse_module(NESTED))
    assert {q: len(n) for q, n in found.items()} == {"Net": 2, "Net.Block": 1, "build.<locals>.Net": 1}
    index = ClassIndex(Project(tmp_path))
    local = index.by_qualname("m.py", "build.<locals>.Net")
    assert local is not None and local.source.positions[local.node].start.line == 8
    assert index.by_qualname("m.py", "Net") is None  # two `class Net` statements: which ran is unknown
    # A name resolves to the last `class Net` at the top: the one Python leaves bound.
    resolved = index.resolve("m.py", "Net")
    assert resolved is not None and resolved.source.positions[resolved.node].start.line == 13


def test_the_profile_records_the_class_file_as_it_spells_paths(tmp_path):
    (tmp_path / "a.py").write_text(COMPILED_NET)
    self_entry = {"type": "Module", "class": "Net", "qualname": "Net", "file": str(tmp_path / "a.py")}
    raw = {
        "pid": 1,
        "compiles": [
            {
                "compile_id": "0/0",
                "frame": {"file": str(tmp_path / "a.py"), "line": 10, "name": "forward"},
                "stack": [{"file": str(tmp_path / "a.py"), "line": 1}],
                "inputs": {"self": self_entry},
            }
        ],
    }
    profile = build_profile([raw], command=["python", "main.py"], root=str(tmp_path))
    assert profile.frames[0].compiles[0].inputs["self"]["defined_in"] == "a.py"
    again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
    assert again.frames[0].module_class("self") == ("a.py", "Net")
    older = {k: v for k, v in self_entry.items() if k != "qualname"}
    raw["compiles"][0]["inputs"]["self"] = older
    old = build_profile([raw], command=["python", "main.py"], root=str(tmp_path))
    assert "defined_in" not in old.frames[0].compiles[0].inputs["self"]
    assert old.frames[0].module_class("self") is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("qualname", "Net; import os"), ("qualname", ""), ("defined_in", "a.txt"), ("defined_in", 3)],
)
def test_a_damaged_class_record_is_a_damaged_profile(tmp_path, field, value):
    entry = {**_module(tmp_path, "a.py", "Net", True), field: value}
    frame = _frame("a.py", "forward", 10, "self.step", 11, {"self": entry}, Location("main.py", 20))
    data = Profile(command=["python"], torch_version=None, python_version="3.11", frames=[frame]).to_json()
    data["sources"] = {"a.py": "0" * 64, "main.py": "0" * 64}
    with pytest.raises(UserError, match=field):
        Profile.from_json(data)


# -- end to end ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_profile_apply_profile_on_two_files_with_a_class_net(tmp_path):
    """With torch (backend eager): the buffer goes into a.py only; a second apply finds nothing;
    profiled again, nothing is pending; the compiled module returns the same tensors, compiled
    once instead of once per step."""
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        root.mkdir()
        (root / "a.py").write_text(COMPILED_NET)
        (root / "main.py").write_text(MAIN)
    run_cli("profile", "--backend", "eager", "--", "python", "main.py", cwd=after, check=0)
    recorded = Profile.load(after / ".recompile-fix" / "profile.json")
    assert recorded.frames[0].module_class("self") == ("a.py", "Net")
    assert recorded.total_compiles == 5
    original, once = _apply_twice(after)
    assert once["main.py"] == original["main.py"]
    assert 'self.register_buffer("step", torch.tensor(0), persistent=False)' in once["a.py"]
    run_cli("profile", "--backend", "eager", "--", "python", "main.py", cwd=after, check=0)
    assert Profile.load(after / ".recompile-fix" / "profile.json").total_compiles == 1
    run_cli("apply", "--check", ".", cwd=after, check=0)
    shutil.rmtree(after / ".recompile-fix")
    old, new = run_recorded(before / "main.py", tmp_path), run_recorded(after / "main.py", tmp_path)
    assert sum(old["compiles"].values()) == 5 and sum(new["compiles"].values()) == 1
    assert_same_outputs(old, new, exact=True)


def test_the_two_programs_are_what_the_tests_say():
    """The hand-built frames' lines are the programs' (forward's def, the counter's `+= 1`)."""
    a, main, glob = (textwrap.dedent(t).splitlines() for t in (COMPILED_NET, MAIN, MAIN_GLOBAL))
    assert a[9].strip() == "def forward(self, x):" and a[10].strip() == "self.step += 1"
    assert main[11].strip() == "def forward(self, x):" and main[19].startswith("    y = net(")
    assert glob[20] == "@torch.compile" and glob[26].startswith("    y = train_step(")


# -- blocks: RF004's recorded count and RF007's decorator target, by file and name ---------------
BLOCK_FILE = """\
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return x
"""


@pytest.mark.parametrize(("stack_file", "count"), [("model.py", 6), ("other.py", None)])
def test_rf004_counts_the_recorded_stack_of_the_same_class_only(stack_file, count):

    stack = BlockStack(path="blocks", count=6, block="Block", file=stack_file, line=4)
    frame = Frame(file="model.py", first_line=1, name="forward", compiles=[Compile(id="0/0", blocks=[stack])])
    site = Site(owner="Net", attr="blocks", block="Block", count=None, line=9)
    assert _recorded_count(site, frame, "model.py").count == count


@pytest.mark.parametrize(("ref_file", "problem"), [("model.py", None), ("blocks.py", "not a class of this file")])
def test_rf007_reads_the_blocks_class_in_its_own_file_only(ref_file, problem):

    source = SourceFile.parse(Path("model.py"), BLOCK_FILE)
    ref = StackRef(path="blocks", block="Block", file=ref_file, line=4, count=6)
    found = _decorator_target_problem(source, "model.py", [ref])
    assert found is None if problem is None else problem in found


def test_the_recorder_records_a_modules_class_by_identity():
    import torch

    from recompile_fix.profile.recorder.inputs import InputWalk

    def build():
        class Net(torch.nn.Module):
            pass

        return Net()

    walk = InputWalk(torch)
    walk.visit("self", build(), 0)
    assert walk.entries["self"]["qualname"].endswith("build.<locals>.Net")
    assert walk.entries["self"]["class"] == "Net" and walk.entries["self"]["file"] == __file__
