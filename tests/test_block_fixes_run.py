"""No RF004 or RF007 fix, safe or unsafe, makes a program of the project fail: every program in
examples/, golden/ and tests/programs/ that holds a stack of blocks is planned with both rules
(its golden Profile, or one recorded here with `--backend eager`), every fix is applied
(`--unsafe-fixes`), and the rewritten program is run under the backend its Profile was recorded
with; it must exit 0."""

import shutil
from pathlib import Path

import pytest
import torch

from conftest import ROOT, run_cli, run_python
from golden_cases import CASES
from recompile_fix.profile.model import torch_release

HARNESS = ROOT / "tests" / "programs" / "run_recording.py"
STACK_WORDS = (b"ModuleList", b"Sequential")


def _programs() -> list[tuple[str, Path, Path | None, bool]]:
    """(id, program, its recorded Profile or None, recorded with the eager backend) for each
    program with a stack of blocks."""
    found = []
    for case in CASES:
        program = case.path / "program.in.py"
        sources = [p for p in case.path.glob("*.py") if p.name != "program.out.py"]
        if any(w in p.read_bytes() for p in sources for w in STACK_WORDS):
            found.append((case.id, program, case.path / "profile.json", case.profile_backend == "eager"))
    for program in sorted([*ROOT.glob("examples/*.py"), *ROOT.glob("tests/programs/**/*.py")]):
        if program.name == "run_recording.py" or not any(w in program.read_bytes() for w in STACK_WORDS):
            continue
        found.append((str(program.relative_to(ROOT)), program, None, True))
    return found


PROGRAMS = _programs()
# The programs that get a fix at all (the others are negative cases, or hold no stack of four
# identical blocks): the test would pass vacuously if these stopped being edited.
EDITED = {
    "RF004/deep_blocks_module",
    "RF004/per_layer_function",
    "RF004/sequential_blocks",
    "RF004/train_inductor",
    "RF007/base_class_other_file",
    "RF007/decorator_forward",
    "RF007/nanogpt_training",
    "RF007/sequential_property",
    "RF008/stochastic_depth",  # a timm-style drop-path ViT that trains: RF007 compiles its blocks
    "examples/deep_blocks.py",
    "examples/train_generate.py",  # nanoGPT: RF007 compiles its blocks (unsafe fixes applied here)
    "tests/programs/sibling/other/model.py",  # static mode on the file alone: RF004 regions its blocks
    "tests/programs/hand_fixes/stochastic_depth_tensor.py",
    "tests/programs/shapes/deep_stages.py",  # a ModuleList of ModuleLists: RF007 writes model.stages[0]
}


# Edited programs another test runs after the same fixes, and checks more closely: an inductor
# compile of a training step is 4-5 s of CPU where inductor's kernels are cached, 15-18 s where
# they are not (each fresh virtualenv: the compiler's include paths are part of the key).
RUN_ELSEWHERE = {
    # test_rf004.py's buffer-reuse test applies the same unsafe fix (RF007 has nothing to replace:
    # the step is compiled, not the model), runs both under inductor and compares the weights.
    "RF004/train_inductor",
}


# The training is in train.py, which imports model.py: RF004 makes the training fix, and under
# the Profile's `--backend eager` none before torch 2.14 (backward through a region fails there).
_TRAINS_ELSEWHERE = "tests/programs/trains_elsewhere/model.py"


@pytest.mark.slow
@pytest.mark.parametrize("name, program, profile, eager", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_every_block_fix_runs(name, program, profile, eager, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(program.parent, work, ignore=shutil.ignore_patterns("*.out.py", "__pycache__", ".recompile-fix"))
    target = work / ("program.py" if program.name == "program.in.py" else program.name)
    if program.name == "program.in.py":
        (work / "program.in.py").rename(target)
    if profile is None:
        run_cli("profile", "--backend", "eager", "--", "python", target.name, cwd=work, check=0)
        profile = work / ".recompile-fix" / "profile.json"
    else:
        shutil.copy(profile, work / "profile.json")
        profile = work / "profile.json"
    original = target.read_text()
    run_cli("apply", ".", "--profile", str(profile), "--select", "RF004,RF007", "--unsafe-fixes", cwd=work, check=0)
    edited = name in EDITED or (name == _TRAINS_ELSEWHERE and torch_release(torch.__version__) >= (2, 14))
    assert (target.read_text() != original) == edited, name
    if not edited:
        return  # unchanged: running it again would prove nothing about a fix (12 of 27 runs)
    if name in RUN_ELSEWHERE:
        return
    # The harness runs it with the eager backend, as recorded; else the program's own backend.
    command = [str(HARNESS), str(tmp_path / "run.pt"), str(target)] if eager else [str(target)]
    done = run_python(*command, cwd=work)
    assert done.returncode == 0, f"{name} fails after its RF004/RF007 fixes:\n{done.stderr[-3000:]}"
