"""Generated projects whose files define classes of one name (issue 32, item 6): two or three
model files each with a `class Net` (or `Block`) counting its calls in an int attribute of a
shared name, a driver that may define its own; one of them compiled and recompiling on its
counter (as the Profile of a run records: the compiled method's frame, a compiled function
reaching the model through a global, or a compiled module of the driver holding it), with the recorder's class record or an older Profile
without it. Every file is in the Profile (the hard case: each could be edited).

The property: `apply` edits no file but the compiled class's, and a second `apply` (the fixed file
no longer the one profiled) edits nothing. CI draws the same projects every run; a longer round
draws new ones (RECOMPILE_FIX_FUZZ_NEW_DRAWS=1, RECOMPILE_FIX_FUZZ_CLASS_PROJECTS=N).
"""

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recompile_fix.pipeline.fix import run_apply
from recompile_fix.profile.model import Compile, Frame, Location, Profile, Reason, sha256_bytes
from recompile_fix.rules import ALL_RULES

EXAMPLES = int(os.environ.get("RECOMPILE_FIX_FUZZ_CLASS_PROJECTS", "40"))
NEW_DRAWS = os.environ.get("RECOMPILE_FIX_FUZZ_NEW_DRAWS") == "1"

X = {"type": "Tensor", "shape": [3], "stride": [1], "dtype": "float32", "device": "cpu"}

# How the forward reads the counter: int arithmetic with a tensor (a buffer keeps it exact) or a
# Python branch (only the config helps).
USES = ("return x * self.{a}", "return x + self.{a}", "return x if self.{a} % 2 else -x")


@dataclass
class Model:
    name: str  # the class's name (shared across files)
    attr: str  # its counter
    class_level: bool  # `step = 0` in the class body, else `self.step = 0` in __init__
    use: str

    def text(self) -> str:
        head = "import torch\nfrom torch import nn\n\n\n" + f"class {self.name}(nn.Module):\n"
        if self.class_level:
            head += f"    {self.attr} = 0\n\n    def __init__(self):\n        super().__init__()\n"
        else:
            head += f"    def __init__(self):\n        super().__init__()\n        self.{self.attr} = 0\n"
        body = f"\n    def forward(self, x):\n        self.{self.attr} += 1\n        {self.use.format(a=self.attr)}\n"
        return head + body


@dataclass
class Project:
    models: list[Model]  # m0.py, m1.py, ...
    own: Model | None  # the driver's own class, never compiled
    compiled: int  # which model file's class the program compiles
    through: str  # "method": its forward is compiled; "global": a compiled function calls it
    # through a global; "submodule": a compiled module of the driver holds it
    recorded: bool  # the Profile has the recorder's class record (else an older Profile)

    def files(self) -> dict[str, str]:
        files = {f"m{i}.py": m.text() for i, m in enumerate(self.models)}
        main = "import torch\nfrom torch import nn\n\n" + "".join(f"import m{i}\n" for i in range(len(self.models)))
        if self.own is not None:
            main += "\n\n" + self.own.text().split("\n\n\n", 1)[1].rstrip("\n") + "\n"
        chosen = f"m{self.compiled}.{self.models[self.compiled].name}()"
        if self.through == "global":
            main += f"\n\nmodel = {chosen}\n\n\n@torch.compile\ndef train_step(x):\n    return model(x)\n\n\n"
            main += "for _ in range(4):\n    y = train_step(torch.ones(3))\n"
        elif self.through == "submodule":
            main += "\n\nclass Wrapper(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            main += f"        self.inner = {chosen}\n\n    def forward(self, x):\n        return self.inner(x)\n\n\n"
            main += "model = torch.compile(Wrapper())\nfor _ in range(4):\n    y = model(torch.ones(3))\n"
        else:
            main += f"\n\nmodel = torch.compile({chosen})\nfor _ in range(4):\n    y = model(torch.ones(3))\n"
        files["main.py"] = main
        return files


@st.composite
def projects(draw) -> Project:
    names = draw(st.sampled_from([("Net", "Net"), ("Net", "Net", "Net"), ("Net", "Block", "Net"), ("Block", "Block")]))
    attrs = st.sampled_from(["step", "step", "calls"])
    models = [Model(n, draw(attrs), draw(st.booleans()), draw(st.sampled_from(USES))) for n in names]
    own = draw(st.none() | st.builds(Model, st.just(names[0]), attrs, st.booleans(), st.sampled_from(USES)))
    return Project(
        models=models,
        own=own,
        compiled=draw(st.integers(0, len(models) - 1)),
        through=draw(st.sampled_from(["method", "global", "submodule"])),
        recorded=draw(st.booleans()),
    )


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith(needle))


def profile_of(project: Project, root: Path, files: dict[str, str]) -> Profile:
    """The Profile a run of the project records: the counter's guard failing at each call."""
    model = project.models[project.compiled]
    file = f"m{project.compiled}.py"
    use = Location(file=file, line=_line(files[file], f"self.{model.attr} += 1"), function="forward")
    site = Location(file="main.py", line=_line(files["main.py"], "y = "))
    if project.through == "global":
        frame_at = ("main.py", _line(files["main.py"], "@torch.compile"), "train_step")
        source, inputs = f"G['model'].{model.attr}", {"x": X}
    elif project.through == "submodule":
        frame_at = ("main.py", _line(files["main.py"], "return self.inner") - 1, "forward")
        entry = {"type": "Module", "class": "Wrapper", "file": str(root / "main.py")}
        if project.recorded:
            entry.update({"qualname": "Wrapper", "defined_in": "main.py"})
        source, inputs = f"self.inner.{model.attr}", {"self": entry, "x": X}
    else:
        frame_at = (file, _line(files[file], "def forward"), "forward")
        entry = {"type": "Module", "class": model.name, "file": str(root / file)}
        if project.recorded:
            entry.update({"qualname": model.name, "defined_in": file})
        source, inputs = f"self.{model.attr}", {"self": entry, "x": X}
    compiles = [Compile(id="0/0", stack=[site], inputs=inputs)]
    for n in range(3):
        reason = Reason(
            kind="module_attribute", text=f"0/{n}: {source} == {n}", source=source, value=n, value_type="int"
        )
        reason.first_use = use
        compiles.append(Compile(id=f"0/{n + 1}", stack=[site], inputs=inputs, reasons=[reason]))
    return Profile(
        command=["python", "main.py"],
        torch_version="2.13.0+cpu",
        python_version="3.11.7",
        frames=[Frame(file=frame_at[0], first_line=frame_at[1], name=frame_at[2], compiles=compiles)],
        sources={name: sha256_bytes(text.encode()) for name, text in files.items()},
    )


def _texts(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.glob("*.py"))}


@pytest.mark.fuzz
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not NEW_DRAWS,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(projects())
def test_apply_edits_the_compiled_class_only_and_a_second_apply_nothing(project):
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        files = project.files()
        for name, text in files.items():
            (root / name).write_text(text)
        profile = profile_of(project, root, files)
        shown = "\n".join(f"# --- {name}\n{text}" for name, text in files.items())
        first = run_apply([str(root)], profile, ALL_RULES, root=str(root), jobs=1, use_cache=False)
        once = _texts(root)
        edited = {name for name in files if once[name] != files[name]}
        # The compiled class is always found (recorded, its constructor's import, or the
        # compiled method's class): its counter fixed there, and nowhere else.
        assert edited == {f"m{project.compiled}.py"}, f"{project}\n{shown}\nedited {edited}: {first.findings}"
        second = run_apply([str(root)], profile, ALL_RULES, root=str(root), jobs=1, use_cache=False)
        assert _texts(root) == once, f"{project}\n{shown}\na second apply edited: {second.findings}"
        assert not second.rewrites
