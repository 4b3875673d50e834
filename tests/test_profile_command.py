"""`recompile-fix profile` as a wrapper: the program keeps its output and exit code, a crash
leaves a partial Profile, nothing compiled gives an empty one, bad commands exit 2."""

import json
import os
import subprocess
import sys

import pytest

from conftest import PROGRAMS, seed
from recompile_fix.profile.model import Profile

EDGE = PROGRAMS / "edge"


@pytest.mark.slow
def test_crash_after_compiling_leaves_a_partial_profile(tmp_path, cli):
    out = tmp_path / "p.json"
    result = cli(
        "profile", "-o", str(out), "--backend", "eager", "--", "python", str(EDGE / "crash_after_compile.py"), check=1
    )
    assert "the training run fell over" in result.stderr  # the program's own traceback
    profile = Profile.load(out)
    assert profile.exit_code == 1
    assert len(profile.frame("fn").compiles) == 2
    assert profile.processes[0]["exit"] == "raised"


@pytest.mark.slow
def test_a_non_finite_float_input_leaves_the_profile_readable(tmp_path, cli):
    """JSON has no spelling for inf: it was written as `Infinity` and every later command refused
    the Profile as damaged. Such a value is left out of the compile's inputs."""
    out = tmp_path / "p.json"
    cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(EDGE / "infinite_default.py"), check=0)
    assert "Infinity" not in out.read_text()
    (frame,) = Profile.load(out).frames
    assert len(frame.compiles) == 2 and "max_norm" not in frame.compiles[0].inputs
    assert "x" in frame.compiles[0].inputs
    assert "RF001" in cli("report", str(out), check=0).stdout


@pytest.mark.slow
def test_program_that_compiles_nothing(tmp_path, cli):
    out = tmp_path / "p.json"
    result = cli("profile", "-o", str(out), "--", "python", str(EDGE / "no_compile.py"), check=3)
    assert "plain eager 2.0" in result.stdout and "to stderr" in result.stderr
    assert "compiled nothing" in result.stderr
    profile = Profile.load(out)
    assert profile.frames == [] and profile.exit_code == 3
    report = cli("report", str(out), check=0)
    assert "No torch.compile compilation was recorded" in report.stdout


def test_command_not_found(tmp_path, cli):
    out = tmp_path / "p.json"
    result = cli("profile", "-o", str(out), "--", "no-such-program-xyz", "arg", check=2)
    assert result.stderr.strip() == "recompile-fix: error: command not found: no-such-program-xyz"
    assert not out.exists()


def test_python_is_the_first_python_on_path_and_must_have_torch(tmp_path):
    """`python` in the command is the user's (first on PATH), not recompile-fix's interpreter; one
    without torch is one line, exit 2, before the program runs."""
    venv = tmp_path / "no-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    (tmp_path / "train.py").write_text("import torch\nprint('never runs')\n")
    out = tmp_path / "p.json"
    result = subprocess.run(
        [sys.executable, "-m", "recompile_fix", "profile", "-o", str(out), "--", "python", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": os.pathsep.join([str(bin_dir), os.environ["PATH"]])},
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert result.stderr.startswith(f"recompile-fix: error: {bin_dir / 'python'} cannot import torch: ")
    assert not out.exists()


def test_no_command(cli):
    result = cli("profile", check=2)
    assert result.stderr.count("\n") == 1 and "no command given" in result.stderr


@pytest.mark.slow
def test_python_dash_m_and_bare_script(tmp_path, cli):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(
        "import torch\nf = torch.compile(lambda x: x + 1)\nf(torch.ones(2)); f(torch.ones(3))\n"
    )
    out = tmp_path / "p.json"
    cli("profile", "-o", str(out), "--backend", "eager", "--", "python", "-m", "pkg", cwd=tmp_path, check=0)
    assert Profile.load(out).total_compiles == 2
    out2 = tmp_path / "p2.json"
    cli("profile", "-o", str(out2), "--backend", "eager", "--", str(seed("shape_change.py")), check=0)
    assert Profile.load(out2).total_compiles == 2


@pytest.mark.slow
def test_a_script_run_by_a_launcher_by_its_relative_path(tmp_path, cli):
    """A launcher that runs the script with runpy by the path as typed (a test harness, a job
    runner): its classes' module `__file__` is relative, and the Profile still names every file
    by its absolute path."""
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * 2\n"
        "net = torch.compile(Net(), backend='eager')\n"
        "for n in (2, 3):\n"
        "    net(torch.ones(n))\n"
    )
    (tmp_path / "launch.py").write_text("import runpy, sys\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
    command = ("python", "launch.py", "train.py")
    cli("profile", "--backend", "eager", "--", *command, cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")  # validated: no relative path
    assert profile.total_compiles == 2
    cli("apply", ".", "--check", cwd=tmp_path, check=1)  # a fix to make, not a damaged Profile


@pytest.mark.slow
def test_import_paths_are_the_folders_the_program_imported_from(tmp_path, cli):
    """PYTHONPATH naming a folder the program imports nothing from (a checkout whose virtualenv
    is inside it, say) is not the program's: `verify` widened its copy to hold it, and copied
    all of /tmp where that folder was in /tmp."""
    project, helpers, unrelated = tmp_path / "proj", tmp_path / "helpers", tmp_path / "unrelated"
    for folder in (project, helpers, unrelated):
        folder.mkdir()
    (helpers / "scale.py").write_text("FACTOR = 2\n")
    (project / "train.py").write_text(
        "import torch\nfrom scale import FACTOR\nf = torch.compile(lambda x: x * FACTOR, backend='eager')\n"
        "f(torch.ones(2)); f(torch.ones(3))\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(unrelated), str(helpers)])}
    cli("profile", "--backend", "eager", "--", "python", "train.py", cwd=project, env=env, check=0)
    profile = Profile.load(project / ".recompile-fix" / "profile.json")
    assert str(helpers) in profile.import_paths and str(unrelated) not in profile.import_paths


@pytest.mark.slow
def test_report_text_and_json(tmp_path, cli):
    out = tmp_path / "p.json"
    cli(
        "profile",
        "-o",
        str(out),
        "--backend",
        "eager",
        "--",
        "python",
        str(seed("limit_hit.py")),
        check=0,
    )
    text = cli("report", str(out), check=0).stdout
    assert "7x tensor size changed: `x` dim 0" in text and "recompile limit hit" in text
    data = json.loads(cli("report", "--json", str(out), check=0).stdout)
    (frame,) = data["frames"]
    # torch compiled 8 times; the 9th attempt was refused at the limit (no compile: issue 14)
    assert (frame["compiles"], frame["recompiles"], frame["limit_hits"]) == (8, 7, 1)


def test_report_on_truncated_profile(tmp_path, cli):
    bad = tmp_path / "p.json"
    bad.write_text('{"schema": "recompile-fix/profile", "frames": [')
    result = cli("report", str(bad), check=2)
    assert result.stderr.count("\n") == 1 and "truncated" in result.stderr


def test_a_run_that_failed_before_compiling_is_not_reported_as_clean():
    """A new user's trial: `report` on the Profile of a program that raised before its first
    compiled call said "nothing recompiles"; it says the run failed, and what to do."""
    from profiles import profile_of
    from recompile_fix.html_report import render_page
    from recompile_fix.report import render_text

    failed = profile_of(exit_code=1)
    text = render_text(failed)
    assert "nothing recompiles" not in text and "before the program exited with code 1" in text
    assert "before the program exited with code 1" in render_page(failed, [])
    assert "nothing recompiles" in render_text(profile_of(exit_code=0))


def test_torchs_wrapper_frame_says_what_it_is():
    """A new user's GAN: `torch.compile(nn.Sequential(...))` on torch 2.13 compiles torch's
    `inner` (wrap_inline), shared by every module compiled that way; the report says so."""
    from profiles import frame_of, profile_of
    from recompile_fix.report import render_text

    wrapper = "/venv/lib/python3.11/site-packages/torch/_dynamo/external_utils.py"
    text = render_text(profile_of(frame_of(["L['args'][0].size()[0] == 4"], name="inner", file=wrapper, first_line=67)))
    assert "torch's wrapper around a compiled torch.nn module" in text
    assert "torch's wrapper" not in render_text(profile_of(frame_of(["x.size()[0] == 4"], name="forward")))


def test_findings_name_torchs_wrapper_frame_by_what_it_wraps():
    """Trials: `torch.compile(nn.Sequential(...))` gave "`x` dim 0 passed to compiled `inner`":
    a name no line of the user's program has. Messages name the module the run recorded
    torch's `inner` wrapping; any other frame keeps its name."""
    from profiles import frame_of, profile_of
    from recompile_fix.report import render_text

    wrapper = "/venv/lib/python3.11/site-packages/torch/_dynamo/external_utils.py"
    wraps = {"fn": {"type": "Module", "class": "Sequential", "qualname": "Sequential"}}
    inner = frame_of(["L['args'][0].size()[0] == 4"], name="inner", file=wrapper, first_line=67, inputs=wraps)
    assert inner.shown_name == "Sequential" and inner.name == "inner"
    unknown = frame_of(["L['args'][0].size()[0] == 4"], name="inner", file=wrapper, first_line=67)
    assert unknown.shown_name == "inner"
    assert frame_of(["x.size()[0] == 4"], name="inner", inputs=wraps).shown_name == "inner"  # the user's own `inner`
    # A library decorator's wrapper (diffusers' `apply_lora_scale` around every UNet's forward),
    # by the one function the run recorded it calling; the user's own decorator keeps its name.
    calls = {"forward_fn": {"file": "/site-packages/diffusers/models/unet.py", "line": 9, "name": "UNet.forward"}}
    lora = frame_of(
        ["L['args'][0].size()[0] == 4"], name="wrapper", file="/site-packages/diffusers/utils/peft_utils.py"
    )
    lora.signature = {"closes_over": calls}
    assert lora.shown_name == "UNet.forward" and lora.name == "wrapper"
    # The report's table too (it said `wrapper (diffusers/utils/peft_utils.py)`), wrapper and file kept.
    assert "UNet.forward via wrapper (diffusers/utils/peft_utils.py:" in render_text(profile_of(lora))
    own = frame_of(["x.size()[0] == 4"], name="wrapper")
    own.signature = {"closes_over": calls}
    assert own.shown_name == "wrapper"
    # The code after a graph break, by the function it was cut from (a trial: "compile
    # `torch_dynamo_resume_in_train_step_at_33` with `dynamic=True`"); the table keeps torch's name.
    resumed = frame_of(["max_norm == 5.0"], name="torch_dynamo_resume_in_train_step_at_33")
    assert resumed.shown_name == "train_step"
    assert "torch_dynamo_resume_in_train_step_at_33 (" in render_text(profile_of(resumed))
