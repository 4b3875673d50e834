"""Issue 30, cause 7: a library frame's guard first used in the project's file (RF010), a first
use that names only torch 2.10's path tail, and the siblings a dropout schedule changes (RF008)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from recompile_fix.analysis.project import Project
from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.model import Profile
from recompile_fix.rules.rf008_scheduled_dropout import RULE as RF008
from recompile_fix.rules.rf010_lazy_default import RULE as RF010

ROOT = Path(__file__).resolve().parent.parent

MODEL = """import torch
from torch import nn
from deco import returns_tuple


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = None

    @returns_tuple
    def forward(self, x):
        if self.scale is None:
            self.scale = 0.5
        return self.fc(x) * self.scale
"""
WRAPPER = """import functools


def returns_tuple(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        return (fn(self, *args, **kwargs),)

    return wrapper
"""


def _project(tmp_path):
    """A project whose model's forward is wrapped by a library decorator (the compiled frame is
    the library's ``wrapper``), and the record torch 2.10 would give of its lazy default."""
    root = str(tmp_path)
    prefix = f"{root}/.venv"
    site = f"{prefix}/lib/python3.11/site-packages"
    os.makedirs(f"{root}/pkg")
    os.makedirs(f"{site}/deco")
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "train.py").write_text("from pkg.model import Net\nout = Net()(x)\n")
    with open(f"{site}/deco/__init__.py", "w") as handle:
        handle.write(WRAPPER)
    # torch 2.10: no "User stack trace" block; the comment's path is a tail (past the common
    # prefix with the directory above torch's), and no stack names pkg/model.py.
    guard = "self.scale is None  # if self.scale is None:  # " + f"{root[1:]}/pkg/model.py:14 in forward"
    compile_ = {"frame": {"file": f"{site}/deco/__init__.py", "line": 6, "name": "wrapper"}}
    raw = {
        "pid": 1,
        "torch_version": "2.10.0",
        "interpreter": {"prefix": prefix, "site": [site], "stdlib": [f"{prefix}/lib/python3.11"]},
        "compiles": [
            {**compile_, "compile_id": "0/0", "stack": [{"file": f"{root}/train.py", "line": 2}]},
            {
                **compile_,
                "compile_id": "0/1",
                "stack": [{"file": f"{root}/train.py", "line": 2}],
                "guard_failures": [f"0/0: {guard}"],
            },
        ],
    }
    return root, raw


def test_a_tail_only_first_use_resolves_against_the_project_files(tmp_path):
    root, raw = _project(tmp_path)
    profile = build_profile([raw], command=["python", "train.py"], root=root)
    (reason,) = profile.frames[0].compiles[1].reasons
    assert (reason.kind, reason.source) == ("id_mismatch", "self.scale")
    assert reason.first_use is not None
    assert (reason.first_use.file, reason.first_use.line, reason.first_use.function) == ("pkg/model.py", 14, "forward")
    assert "pkg/model.py" in profile.sources  # hashed, so a rule may read it


def test_a_tail_two_project_files_end_with_is_no_first_use(tmp_path):
    root, raw = _project(tmp_path)
    os.makedirs(f"{root}/other/{root[1:]}/pkg")
    (tmp_path / "other" / root[1:] / "pkg" / "model.py").write_text(MODEL)
    profile = build_profile([raw], command=["python", "train.py"], root=root)
    (reason,) = profile.frames[0].compiles[1].reasons
    assert reason.first_use is None  # which of the two: a guess, so none


def test_a_tail_in_a_virtualenv_of_the_project_is_not_the_project(tmp_path):
    root, raw = _project(tmp_path)
    venv = tmp_path / "env2"
    (venv / root[1:] / "pkg").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / root[1:] / "pkg" / "model.py").write_text(MODEL)
    profile = build_profile([raw], command=["python", "train.py"], root=root)
    (reason,) = profile.frames[0].compiles[1].reasons
    assert reason.first_use is not None and reason.first_use.file == "pkg/model.py"


def test_rf010_fixes_a_library_wrapper_frame_whose_guard_is_first_used_in_the_project(tmp_path):
    root, raw = _project(tmp_path)
    profile = build_profile([raw], command=["python", "train.py"], root=root)
    assert profile.frames[0].file == "/site-packages/deco/__init__.py"
    project = Project(root, expected_hashes=profile.sources, interpreter=profile.interpreter)
    (finding,) = RF010.plan(profile, project)
    assert (finding.file, finding.location.line, finding.safety.value) == ("pkg/model.py", 14, "safe")
    assert "self.scale = 0.5" in finding.params["text"]


FOUR = ROOT / "golden" / "RF008" / "four_dropouts"
LOOP = """    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
"""


def _rf008_converts(tmp_path, schedule: str) -> list[str]:
    """The dropouts RF008 converts in the four-dropout program with its schedule replaced by
    ``schedule``, read with the Profile recorded on the original (torch named only ``drop1``)."""
    text = (FOUR / "program.in.py").read_text()
    assert LOOP in text
    (tmp_path / "program.py").write_text(text.replace(LOOP, schedule))
    profile = Profile.from_json(json.loads((FOUR / "profile.json").read_text()))
    assert {r.source for f in profile.frames for r in f.reasons()} == {"self._modules['drop1'].p"}
    (finding,) = RF008.plan(profile, Project(tmp_path))
    source = (tmp_path / "program.py").read_text()
    names = []
    for start, _ in finding.params["replace"]:
        line = source[source.rindex("\n", 0, start) + 1 : source.index("\n", start)]
        match = re.match(r"\s*self\.(\w+) = ", line)
        assert match is not None, line
        names.append(match.group(1))
    return sorted(names)


@pytest.mark.parametrize(
    "schedule, converted",
    [
        (LOOP, ["drop1", "drop2", "drop3", "drop4"]),  # every nn.Dropout the loop reaches
        (
            "    model.drop1.p = p\n    model.drop2.p = p\n    model.drop3.p = p\n    model.drop4.p = p\n",
            ["drop1", "drop2", "drop3", "drop4"],
        ),
        ("    for drop in (model.drop1, model.drop3):\n        drop.p = p\n", ["drop1", "drop3"]),
        ("    model.drop1.p = p\n", ["drop1"]),  # the others keep their p: left as they are
    ],
    ids=["modules-loop", "named-writes", "named-loop", "one-write"],
)
def test_rf008_converts_the_siblings_the_schedule_sets(tmp_path, schedule, converted):
    assert _rf008_converts(tmp_path, schedule) == converted


def test_rf008_says_which_siblings_it_converts(tmp_path):
    _rf008_converts(tmp_path, "    model.drop1.p = p\n    model.drop2.p = p\n")
    profile = Profile.from_json(json.loads((FOUR / "profile.json").read_text()))
    (finding,) = RF008.plan(profile, Project(tmp_path))
    assert any("also sets `drop2`" in note and "program.py:" in note for note in finding.notes), finding.notes
