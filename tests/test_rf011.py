"""RF011 guard-dropping: each spelling of a guard-dropping option is found without a Profile,
never fixed, and with a Profile names what the run compiled; the measured claim in its message
(one compile, the first value's answer) holds on the golden program."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_python
from equivalence import run_recorded, total_compiles
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Profile
from recompile_fix.rules import rule_by_id

RF011 = rule_by_id("RF011")
GOLDEN = ROOT / "golden" / "RF011"


def static(text: str):
    source = SourceFile.parse(Path("program.py"), text)
    return RF011.plan_static(source, "program.py")


@pytest.mark.parametrize(
    "text, what, line",
    [
        (
            'import torch\nc = torch.compile(m, options={"guard_filter_fn": torch.compiler.skip_guard_on_globals_unsafe})\n',
            "`guard_filter_fn=torch.compiler.skip_guard_on_globals_unsafe`",
            2,
        ),
        (
            "from torch.compiler import keep_tensor_guards_unsafe as keep\nimport torch\n"
            "opts = dict(guard_filter_fn=keep)\nc = torch.compile(m, options=opts)\n",
            "`guard_filter_fn=torch.compiler.keep_tensor_guards_unsafe`",
            3,
        ),
        (
            "import torch\nopts = {}\nopts['guard_filter_fn'] = torch.compiler.skip_all_guards_unsafe\n",
            "`guard_filter_fn=torch.compiler.skip_all_guards_unsafe`",
            3,
        ),
        (
            "import torch\nfilter_fn = torch.compiler.keep_portable_guards_unsafe\n",
            "`torch.compiler.keep_portable_guards_unsafe`",
            2,
        ),
        (  # a filter of the program's own
            'import torch\nc = torch.compile(m, options={"guard_filter_fn": lambda entries: [False for e in entries]})\n',
            "`guard_filter_fn`",
            2,
        ),
        (
            'import torch\ntorch.compiler.set_stance("default", skip_guard_eval_unsafe=True)\n',
            "`set_stance(..., skip_guard_eval_unsafe=...)`",
            2,
        ),
    ],
)
def test_each_spelling_is_one_finding_without_a_fix(text, what, line):
    (finding,) = static(text)
    assert finding.rule == "RF011" and finding.safety is Safety.NONE and finding.confidence == "static"
    assert finding.message.startswith(what + " drops ")
    assert finding.location.line == line
    assert "wrong answers" in finding.message
    assert any("[1, 1, 1, 1] where eager gives [1, 2, 3, 4]" in note for note in finding.notes)
    assert RF011.fix(finding, SourceFile.parse(Path("program.py"), text), "torch") == []


@pytest.mark.parametrize(
    "text",
    [
        'import torch\nc = torch.compile(m, options={"triton.cudagraphs": True})\n',
        'import torch\ntorch.compiler.set_stance("default", skip_guard_eval_unsafe=False)\n',
        "import torch\nguard_filter_fn = None  # a name, not an option\n",
        "def skip_all_guards_unsafe(entries):\n    return entries\n",  # the program's own name, not torch's
    ],
)
def test_other_options_are_left_alone(text):
    assert static(text) == []


def test_a_filter_named_in_its_entry_is_one_finding_not_two():
    text = 'import torch\nc = torch.compile(m, options={"guard_filter_fn": torch.compiler.skip_all_guards_unsafe})\n'
    assert len(static(text)) == 1


def test_with_the_profile_it_names_the_frames_compiled_once(tmp_path):
    case = GOLDEN / "module_attribute"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    profile = Profile.load(case / "profile.json")
    (finding,) = RF011.plan(profile, Project(tmp_path, expected_hashes=profile.sources))
    assert finding.confidence == "profile" and finding.safety is Safety.NONE
    assert finding.evidence["frames"] == {"forward (program.py:13)": 1}
    assert finding.notes[0].startswith("the run compiled `forward` once")


@pytest.mark.slow
def test_the_measured_claim_one_compile_and_the_first_values_answer(tmp_path):
    program = GOLDEN / "module_attribute" / "program.in.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH")}

    def printed(**more: str) -> str:
        if more:  # a variable torch reads as it is imported: a fresh process
            done = subprocess.run([sys.executable, str(program)], env={**env, **more}, capture_output=True, text=True)
        else:
            done = run_python(program, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert printed() == "[1, 1, 1, 1]"
    assert printed(TORCHDYNAMO_DISABLE="1") == "[1, 2, 3, 4]"
    assert total_compiles(run_recorded(program, tmp_path)) == 1
