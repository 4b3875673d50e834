"""Library files are recognised by where the interpreter that ran keeps its libraries, not by
lying outside the project: a venv at .venv, venv or env inside the project, a conda prefix
inside or outside it, a system Python's dist-packages. The Profile spells them by import path
and finds them again on another machine (no torch run here)."""

from __future__ import annotations

import json
import os

import pytest

from recompile_fix.errors import UserError
from recompile_fix.profile.libraries import (
    Interpreter,
    current_interpreter,
    locate_library_file,
    spell_library_file,
    spell_library_paths_in,
)
from recompile_fix.profile.merge import build_profile
from recompile_fix.profile.model import Profile, is_library_path, relative_to_root, resolve


def _venv(prefix: str) -> Interpreter:
    return Interpreter(
        prefix=prefix,
        site=[f"{prefix}/lib/python3.11/site-packages"],
        stdlib=["/usr/lib/python3.11", f"{prefix}/lib/python3.11"],
    )


@pytest.mark.parametrize("venv", [".venv", "venv", "env", ".conda"])
def test_a_virtualenv_inside_the_project_is_a_library(venv):
    root = "/home/u/proj"
    interpreter = _venv(f"{root}/{venv}")
    torch_file = f"{root}/{venv}/lib/python3.11/site-packages/torch/optim/adam.py"
    assert relative_to_root(torch_file, root, interpreter) == "/site-packages/torch/optim/adam.py"
    assert relative_to_root(f"{root}/{venv}/lib/python3.11/json/decoder.py", root, interpreter) == (
        "/stdlib/json/decoder.py"
    )
    assert relative_to_root(f"{root}/train.py", root, interpreter) == "train.py"  # the program's own
    assert is_library_path("/site-packages/torch/optim/adam.py") and is_library_path("/stdlib/json/decoder.py")


def test_a_conda_prefix_without_site_packages_in_the_path():
    """A conda env inside the project whose libraries sit in a folder not named site-packages:
    the recorded directories decide, not the folder's name."""
    root = "/p"
    interpreter = Interpreter(prefix="/p/env", site=["/p/env/pkgs"], stdlib=["/p/env/lib/python3.11"])
    assert relative_to_root("/p/env/pkgs/torch/nn/modules/dropout.py", root, interpreter) == (
        "/site-packages/torch/nn/modules/dropout.py"
    )
    assert relative_to_root("/p/env/bin/helper.py", root, interpreter) == "/python-prefix/bin/helper.py"


def test_outside_the_project_and_a_system_python():
    assert relative_to_root("/opt/venv/lib/python3.11/site-packages/torch/x.py", "/p", _venv("/opt/venv")) == (
        "/site-packages/torch/x.py"
    )
    # A system Python's Debian layout, and a run recorded without the interpreter (a trace).
    assert spell_library_file("/usr/lib/python3/dist-packages/torch/x.py") == "/site-packages/torch/x.py"
    assert relative_to_root("/srv/shared/helpers.py", "/p") == "/srv/shared/helpers.py"  # no library


def test_a_library_file_is_found_where_the_interpreter_keeps_it(tmp_path):
    site = tmp_path / "proj" / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "torch" / "optim").mkdir(parents=True)
    (site / "torch" / "optim" / "adam.py").write_text("# adam\n")
    recorded = Interpreter(prefix=".venv", site=[".venv/lib/python3.11/site-packages"])
    found = resolve("/site-packages/torch/optim/adam.py", tmp_path / "proj", recorded)
    assert found == site / "torch" / "optim" / "adam.py"
    # Not there (a clone elsewhere, CI): this interpreter's site-packages, where torch is.
    here = locate_library_file("/site-packages/pytest/__init__.py", recorded, tmp_path / "elsewhere")
    assert here is not None and here.is_file()
    assert resolve("train.py", tmp_path) == tmp_path / "train.py"


def test_guard_text_keeps_no_machine_path():
    text = (
        'User stack trace:\n  File "/work/x/.venv/lib/python3.11/site-packages/transformers/utils/generic.py", line 1'
    )
    assert spell_library_paths_in(text) == (
        'User stack trace:\n  File "/site-packages/transformers/utils/generic.py", line 1'
    )


def test_merge_records_the_interpreter_and_spells_its_files(tmp_path):
    root = str(tmp_path)
    prefix = f"{root}/.venv"
    site = f"{prefix}/lib/python3.11/site-packages"
    (tmp_path / "train.py").write_text("def step(x):\n    return x\n")
    os.makedirs(f"{site}/torch/optim")
    with open(f"{site}/torch/optim/adam.py", "w") as handle:
        handle.write("# torch\n" * 9 + "def step(self):\n    pass\n")
    raw = {
        "pid": 1,
        "interpreter": {"prefix": prefix, "site": [site], "stdlib": [f"{prefix}/lib/python3.11"]},
        "compiles": [
            {
                "compile_id": "0/0",
                "frame": {"file": f"{site}/torch/optim/adam.py", "line": 10, "name": "step"},
                "stack": [{"file": f"{root}/train.py", "line": 2}],
            }
        ],
    }
    profile = build_profile([raw], command=["python", "train.py"], root=root)
    assert profile.frames[0].file == "/site-packages/torch/optim/adam.py"
    assert set(profile.sources) == {"/site-packages/torch/optim/adam.py", "train.py"}
    assert profile.interpreter == Interpreter(".venv", [".venv/lib/python3.11/site-packages"], [".venv/lib/python3.11"])
    again = Profile.from_json(json.loads(json.dumps(profile.to_json())))
    assert again.interpreter == profile.interpreter


def test_a_damaged_interpreter_is_a_damaged_profile(tmp_path):
    data = Profile(command=["python"], torch_version=None, python_version="3.11").to_json()
    data["interpreter"] = {"prefix": "", "site": [3]}
    with pytest.raises(UserError, match="interpreter"):
        Profile.from_json(data)


def test_this_interpreter():
    here = current_interpreter()
    assert os.path.isabs(here.prefix) and here.site and here.stdlib


@pytest.mark.parametrize(
    ("path", "spelled"),
    [
        ("/root/.pyenv/versions/3.11.7/lib/python3.11/contextlib.py", "/stdlib/contextlib.py"),
        ("/usr/lib/python3.12/json/decoder.py", "/stdlib/json/decoder.py"),
        ("/opt/conda/lib/python3.11/site-packages/torch/optim/adam.py", "/site-packages/torch/optim/adam.py"),
        ("/home/u/lib/python3.11/mymodule.py", None),  # not a standard library module's name
        ("/home/u/proj/train.py", None),
    ],
)
def test_a_trace_names_no_interpreter_the_layout_decides(path, spelled):
    """A TORCH_TRACE names no interpreter: its records spell a library file by the layout alone,
    the same spelling the recorder's Profile gives it (one function for both)."""
    assert spell_library_file(path) == spelled
    recorded = spell_library_file(path, _venv("/home/u/proj/.venv"))
    assert recorded == spelled or (recorded is None and spelled is None)


def test_the_trace_reader_and_the_recorder_read_one_profile():
    stdlib = "/root/.pyenv/versions/3.11.7/lib/python3.11"
    frame = {"file": f"{stdlib}/contextlib.py", "line": 299, "name": "helper"}
    compile_ = {"compile_id": "0/0", "frame": frame, "guard_failures": [], "stack": [], "seconds": {}}
    record = {"pid": 1, "rank": None, "compiles": [compile_], "graph_breaks": [], "exit": {}}
    recorded = {**record, "interpreter": {"prefix": "/p/.venv", "site": [], "stdlib": [stdlib]}}
    traced = build_profile([record], command=["--from-trace", "t"], root="/p")
    profiled = build_profile([recorded], command=["python", "t.py"], root="/p")
    assert [f.key for f in traced.frames] == [f.key for f in profiled.frames]
    assert traced.frames[0].file == "/stdlib/contextlib.py"
