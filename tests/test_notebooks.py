"""Jupyter notebooks: `profile` runs their code cells, `apply` / `--diff` / `--check` edit the cells
in place (outputs and metadata keep their bytes), static mode scans them, and the rules see one
Python text (recompile_fix/notebook.py)."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from conftest import PROGRAMS, run_cli
from recompile_fix.notebook import Notebook, cell_diffs, display_location, notebook_script

NOTEBOOKS = PROGRAMS / "notebooks"
NOTEBOOK = NOTEBOOKS / "train.ipynb"
# The Profile the tool recorded on train.ipynb (`profile --backend eager -- train.ipynb`), its
# class files spelled under /project.
PROFILE = NOTEBOOKS / "profile.json"


def _check_notebook(data: bytes) -> dict:
    """Valid for Jupyter's own schema (nbformat, a test dependency only), and nbformat 4's
    structure as `apply` must keep it: a source as text or a list of lines."""
    nbformat.validate(nbformat.reads(data.decode("utf-8"), as_version=nbformat.NO_CONVERT))
    nb = json.loads(data)
    assert nb["nbformat"] == 4 and isinstance(nb["nbformat_minor"], int) and isinstance(nb["metadata"], dict)
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("code", "markdown", "raw")
        assert isinstance(cell["metadata"], dict)
        source = cell["source"]
        assert isinstance(source, str) or all(isinstance(s, str) for s in source)
        if isinstance(source, list):  # every line but the last ends with a newline
            assert all(s.endswith("\n") for s in source[:-1])
        if cell["cell_type"] == "code":
            assert isinstance(cell["outputs"], list) and "execution_count" in cell
    return nb


def _project(tmp_path: Path, with_profile: bool) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copy(NOTEBOOK, project / "train.ipynb")
    if with_profile:
        (project / ".recompile-fix").mkdir()
        shutil.copy(PROFILE, project / ".recompile-fix" / "profile.json")
    return project


def _cells_except_source(nb: dict) -> list[dict]:
    return [{k: v for k, v in cell.items() if k != "source"} for cell in nb["cells"]]


def _source(nb: dict, cell: int) -> str:
    return "".join(nb["cells"][cell - 1]["source"])


# -- the text the rules read ----------------------------------------------------------------------


def test_the_text_is_the_code_cells_with_magics_commented_out():
    nb = Notebook(NOTEBOOK, NOTEBOOK.read_bytes())
    lines = nb.text.splitlines()
    assert lines[0] == "# %% [cell 2]"  # cell 1 is markdown: not in the text
    assert lines[1] == '# [ipython] %config InlineBackend.figure_format = "retina"'
    assert "# [ipython] !nvidia-smi -L" in lines
    assert lines[lines.index("# %% [cell 6]") + 1 :] == [  # %%time runs its cell's Python
        "# [ipython] %%time",
        "for _ in range(3):",
        "    pass",
    ]
    compile(nb.text, "train.ipynb", "exec")  # one Python text
    # Unchanged text writes the same bytes back; each line maps to its cell's line.
    assert nb.rewritten(nb.text) == NOTEBOOK.read_bytes()
    assert display_location(str(NOTEBOOK), lines.index("# %% [cell 4]") + 3) == f"{NOTEBOOK}:cell 4:2"
    assert display_location(str(NOTEBOOK), 1) == f"{NOTEBOOK}:1"  # a marker is in no cell


@pytest.mark.parametrize(
    "source, python",
    [
        ("%%bash\necho hi", ["# [ipython] %%bash", "# [ipython] echo hi"]),  # not Python: all set aside
        ("%%capture out\nx = f()\n", ["# [ipython] %%capture out", "x = f()"]),
        ("for _ in range(2):\n    %time step(x)\n", ["for _ in range(2):", "    step(x)  # [ipython] %time"]),
        ("files = !ls\n%matplotlib inline", ["# [ipython] files = !ls", "# [ipython] %matplotlib inline"]),
        ("a != b\nx %= 3\ny = 5 % 2", ["a != b", "x %= 3", "y = 5 % 2"]),  # Python, not magics
    ],
)
def test_ipython_syntax_is_set_aside_and_restored(source, python):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": source}], "nbformat": 4}
    data = json.dumps(nb, indent=1).encode()
    notebook = Notebook("x.ipynb", data)
    assert notebook.text.splitlines()[1:] == python
    assert notebook.rewritten(notebook.text) == data
    # An edit of the code a magic runs keeps the magic.
    edited = notebook.text.replace("step(x)", "step(y)")
    assert json.loads(notebook.rewritten(edited))["cells"][0]["source"] == source.replace("step(x)", "step(y)")


def test_the_script_profile_runs_keeps_every_line_number():
    nb = Notebook(NOTEBOOK, NOTEBOOK.read_bytes())
    script = notebook_script(nb)
    assert script.splitlines()[1:] == nb.text.splitlines()[1:]
    assert str(NOTEBOOK.parent.resolve()) in script.splitlines()[0]  # Jupyter's cwd and sys.path[0]


def test_an_edit_maps_back_to_its_cell_only():
    data = NOTEBOOK.read_bytes()
    nb = Notebook(NOTEBOOK, data)
    edited = nb.text.replace("    %time", "").replace(
        "for data, target in loader:\n", "for data, target in loader:\n    torch._dynamo.mark_dynamic(data, 0)\n"
    )
    # An import put before the first marker goes to the first code cell; the magics come back.
    edited = "import os\n" + edited
    after = json.loads(nb.rewritten(edited))
    before = json.loads(data)
    assert _cells_except_source(after) == _cells_except_source(before)
    assert _source(after, 2) == "import os\n" + _source(before, 2)
    assert _source(after, 2).startswith("import os\n%config")
    assert "    torch._dynamo.mark_dynamic(data, 0)\n" in after["cells"][2]["source"]
    assert [_source(after, n) for n in (1, 4, 5, 6)] == [_source(before, n) for n in (1, 4, 5, 6)]
    assert not _source(after, 3).endswith("\n")  # the cell's last line had no line end
    assert [cell for cell, _, _ in cell_diffs(nb.text, edited)] == [2, 3]


@pytest.mark.parametrize(
    "data, why",
    [
        (b"{not json", "not JSON"),
        (b'{"cells": 3}', "no list of cells"),
        (json.dumps({"cells": [{"cell_type": "code", "source": ["# %% [cell 9]\n"]}]}).encode(), "map cells"),
    ],
)
def test_a_notebook_that_is_not_one_is_one_line(tmp_path, data, why):
    (tmp_path / "bad.ipynb").write_bytes(data)
    done = run_cli("apply", "--check", "bad.ipynb", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert why in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "bad.ipynb").read_bytes() == data


# -- apply from a Profile -------------------------------------------------------------------------


def test_apply_diff_shows_one_diff_per_cell(tmp_path):
    project = _project(tmp_path, with_profile=True)
    done = run_cli("apply", "--unsafe-fixes", "--diff", "train.ipynb", cwd=project)
    assert done.returncode == 1, done.stderr
    headers = [line for line in done.stdout.splitlines() if line.startswith(("--- ", "+++ "))]
    assert headers == [
        "--- a/train.ipynb:cell 3",
        "+++ b/train.ipynb:cell 3",
        "--- a/train.ipynb:cell 4",
        "+++ b/train.ipynb:cell 4",
    ]
    assert "+    torch._dynamo.mark_dynamic(data, 0)" in done.stdout
    assert "+adam = torch.optim.Adam(net.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))" in done.stdout
    assert (project / "train.ipynb").read_bytes() == NOTEBOOK.read_bytes()  # --diff writes nothing
    check = run_cli("apply", "--unsafe-fixes", "--check", "train.ipynb", cwd=project)
    assert check.returncode == 1
    # Findings name the cell and the line in it, as ruff does.
    assert "train.ipynb:cell 3:19:" in check.stdout and "train.ipynb:cell 4:2:" in check.stdout


def test_apply_edits_the_cells_and_nothing_else(tmp_path):
    project = _project(tmp_path, with_profile=True)
    run_cli("apply", "--unsafe-fixes", "train.ipynb", cwd=project, check=0)
    data = (project / "train.ipynb").read_bytes()
    after, before = _check_notebook(data), json.loads(NOTEBOOK.read_bytes())
    assert _cells_except_source(after) == _cells_except_source(before)
    assert after["metadata"] == before["metadata"]
    changed = [n for n in range(1, len(before["cells"]) + 1) if _source(after, n) != _source(before, n)]
    assert changed == [3, 4]
    # Byte for byte: the file is the original with only the two cells' source lines changed, in
    # Jupyter's layout (indent 1, sorted keys, a final newline).
    assert data.decode() == json.dumps(after, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    old_lines, new_lines = NOTEBOOK.read_text().splitlines(), data.decode().splitlines()
    assert [line for line in new_lines if line not in old_lines] == [
        '    "    torch._dynamo.mark_dynamic(data, 0)\\n",',
        '    "adam = torch.optim.Adam(net.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))\\n",',
    ]
    assert len(new_lines) == len(old_lines) + 1
    # Applied: a second run has nothing to do.
    again = run_cli("apply", "--unsafe-fixes", "--check", "train.ipynb", cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already fixed" in again.stderr


# -- static mode ----------------------------------------------------------------------------------


def test_static_mode_scans_notebooks_in_a_folder(tmp_path):
    project = _project(tmp_path, with_profile=False)
    (project / "sub").mkdir()
    shutil.move(project / "train.ipynb", project / "sub" / "train.ipynb")
    done = run_cli("apply", "--unsafe-fixes", "--diff", ".", cwd=project)
    assert done.returncode == 1, done.stderr
    assert "--- a/sub/train.ipynb:cell 4" in done.stdout
    assert "+adam = torch.optim.Adam(net.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))" in done.stdout
    run_cli("apply", "--unsafe-fixes", ".", cwd=project, check=0)
    after = _check_notebook((project / "sub" / "train.ipynb").read_bytes())
    assert "lr=torch.tensor(0.01, dtype=torch.float64)" in _source(after, 4)
    assert _cells_except_source(after) == _cells_except_source(json.loads(NOTEBOOK.read_bytes()))


def test_magics_survive_a_rewrite(tmp_path):
    """A notebook whose only code cell mixes line magics, a shell line and the fixable code."""
    cell = (
        "%load_ext autoreload\n"
        "import torch\n"
        "!pip list\n"
        "model = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.Adam(model.parameters(), lr=0.001)\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
        "step = torch.compile(opt.step)\n"
        "for _ in range(3):\n"
        "    %time step()\n"
        "    sched.step()"
    )
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": 7, "metadata": {}, "outputs": [], "source": cell},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    data = json.dumps(nb, indent=2) + "\n"  # another layout: kept as it is
    (tmp_path / "magic.ipynb").write_text(data)
    run_cli("apply", "--unsafe-fixes", "magic.ipynb", cwd=tmp_path, check=0)
    written = (tmp_path / "magic.ipynb").read_text()
    after = _check_notebook(written.encode())
    source = after["cells"][0]["source"]
    assert isinstance(source, str)  # a string stays a string
    assert source == cell.replace("lr=0.001", "lr=torch.tensor(0.001, dtype=torch.float64)")
    assert written == json.dumps(after, indent=2) + "\n"


def test_python_notebook_spellings_run_the_notebook():
    from recompile_fix.profile.notebook_run import _notebook_argument

    assert _notebook_argument(["nb.ipynb"]) == 0
    assert _notebook_argument(["python", "nb.ipynb", "--epochs", "1"]) == 1
    assert _notebook_argument(["python3", "-X", "dev", "nb.ipynb"]) == 3
    assert _notebook_argument(["python", "train.py", "nb.ipynb"]) is None  # the script's argument
    assert _notebook_argument(["python", "-m", "pkg", "nb.ipynb"]) is None


# -- the whole loop -------------------------------------------------------------------------------


def _hand_fixed(text: str) -> str:
    """What a person writes to stop both recompiles: the ragged batch's dim 0 marked dynamic, and
    the learning rate a tensor (torch's recompilation guide)."""
    text = text.replace(
        "    loss = F.cross_entropy(compiled_model(data), target)\n",
        "    torch._dynamo.mark_dynamic(data, 0)\n    loss = F.cross_entropy(compiled_model(data), target)\n",
    )
    return text.replace("lr=0.01)", "lr=torch.tensor(0.01, dtype=torch.float64))")


@pytest.mark.slow
def test_profile_apply_and_run_the_notebook_again(tmp_path):
    from equivalence import assert_same_outputs, run_recorded, total_compiles
    from recompile_fix.profile.model import Profile, sha256_bytes

    project = _project(tmp_path, with_profile=False)
    notebook = project / "train.ipynb"
    run_cli("profile", "--backend", "eager", "--", "train.ipynb", cwd=project, check=0)
    raw = (project / ".recompile-fix" / "profile.json").read_text()
    assert ".recompile-fix/notebooks" not in raw  # the Profile names the notebook, never the script
    profile = Profile.load(project / ".recompile-fix" / "profile.json")
    text = Notebook(notebook, notebook.read_bytes()).text
    assert profile.sources["train.ipynb"] == sha256_bytes(text.encode())
    recompiling = {f.name: f for f in profile.frames if f.recompiles}
    assert recompiling["forward"].file == "train.ipynb"
    # `def forward` is line 7 of cell 3.
    assert display_location(str(notebook), recompiling["forward"].first_line) == f"{notebook}:cell 3:7"

    diff = run_cli("apply", "--unsafe-fixes", "--diff", "train.ipynb", cwd=project)
    assert diff.returncode == 1 and "--- a/train.ipynb:cell 3" in diff.stdout and "a/train.ipynb:cell 4" in diff.stdout
    run_cli("apply", "--unsafe-fixes", "train.ipynb", cwd=project, check=0)
    _check_notebook(notebook.read_bytes())

    # Run the cells again (the script `profile` runs), beside the original and the hand fix.
    scripts = {}
    for name, source in {
        "original": text,
        "applied": Notebook(notebook, notebook.read_bytes()).text,
        "hand": _hand_fixed(text),
    }.items():
        nb = Notebook(notebook, notebook.read_bytes())
        nb.text = source
        scripts[name] = project / f"{name}.py"
        scripts[name].write_text(notebook_script(nb))
    assert scripts["hand"].read_text() != scripts["original"].read_text()
    runs = {name: run_recorded(path, tmp_path) for name, path in scripts.items()}
    assert total_compiles(runs["applied"]) == total_compiles(runs["hand"]) < total_compiles(runs["original"])
    assert runs["applied"]["compiles"] == runs["hand"]["compiles"]
    assert_same_outputs(runs["original"], runs["applied"])
    assert_same_outputs(runs["original"], runs["applied"], of="globals")


def test_report_names_cells(tmp_path):
    project = _project(tmp_path, with_profile=True)
    done = run_cli("report", cwd=project, check=0)
    assert "forward (train.ipynb:cell 3:7)" in done.stdout  # `def forward`: line 7 of cell 3
    assert "train_step (train.ipynb:cell 4:7)" in done.stdout
    assert "train.ipynb:cell 3:19:" in done.stdout  # the RF001 finding's call


@pytest.mark.slow
def test_fix_verifies_and_writes_the_cells(tmp_path):
    """`fix` profiles the notebook, applies, profiles its copy again and writes what it verified
    (with --unsafe-fixes: the tensor lr in cell 4 rounds Adam's parameters in the last bits)."""
    project = _project(tmp_path, with_profile=False)
    done = run_cli("fix", "--unsafe-fixes", "--backend", "eager", "--", "train.ipynb", cwd=project, check=0)
    assert "No recompile remains." in done.stdout + done.stderr
    after, before = _check_notebook((project / "train.ipynb").read_bytes()), json.loads(NOTEBOOK.read_bytes())
    assert _cells_except_source(after) == _cells_except_source(before)
    assert [n for n in range(1, 7) if _source(after, n) != _source(before, n)] == [3, 4]


def test_running_the_notebook_again_does_not_make_the_profile_stale(tmp_path):
    """The Profile hashes the cells' code, not the file: new outputs and execution counts (the
    notebook run again in Jupyter) keep it; an edit of a cell's code does not."""
    project = _project(tmp_path, with_profile=True)
    nb = json.loads(NOTEBOOK.read_bytes())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = (cell["execution_count"] or 0) + 10
            cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["again\n"]}]
    (project / "train.ipynb").write_text(json.dumps(nb, sort_keys=True, indent=1) + "\n")
    done = run_cli("apply", "--diff", "train.ipynb", cwd=project)
    assert done.returncode == 1 and "--- a/train.ipynb:cell 3" in done.stdout, done.stderr
    nb["cells"][1]["source"].insert(0, "import os\n")  # the code changed: line numbers no longer hold
    (project / "train.ipynb").write_text(json.dumps(nb, sort_keys=True, indent=1) + "\n")
    stale = run_cli("apply", "--diff", "train.ipynb", cwd=project)
    assert "changed since it was profiled" in stale.stderr and "cell 3" not in stale.stdout


def test_another_kernels_notebook_has_no_python_to_read(tmp_path):
    nb = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": "x <- c(1, 2)\nprint(x)"}],
        "metadata": {"kernelspec": {"language": "R", "name": "ir"}, "language_info": {"name": "R"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    data = json.dumps(nb, indent=1).encode()
    assert Notebook("r.ipynb", data).text == ""
    (tmp_path / "r.ipynb").write_bytes(data)
    shutil.copy(NOTEBOOK, tmp_path / "train.ipynb")
    done = run_cli("apply", "--unsafe-fixes", "--check", ".", cwd=tmp_path)
    assert done.returncode == 1 and "error" not in done.stderr  # the Python notebook's finding only
    assert "train.ipynb:cell 4:2:" in done.stdout and "r.ipynb" not in done.stdout
