"""A Profile's life after the run it records: a second `apply`, `apply --check` (both pre-commit
hooks) and the language server find nothing pending once `apply` ran, and static mode never
contradicts a fact the Profile established (the program trains); a run that compiled nothing
never replaces a Profile that recorded compiles; the stale-Profile line names the file, says what
changed, and agrees with the diff printed above it.

Issue 14's failures 3 and 4, each as the user met them."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_cli
from recompile_fix.lsp.engine import Engine
from recompile_fix.pipeline.fix import is_selected
from recompile_fix.profile.model import Profile

# model.py: four blocks in a ModuleList (RF004), no training in the file; train.py trains it on a
# ragged last batch (RF001). profile.json: the Profile the tool recorded on them
# (`pytest --update-golden` records it again).
TRAINS_ELSEWHERE = PROGRAMS / "trains_elsewhere"


@pytest.fixture
def trains_elsewhere(tmp_path, request):
    work = tmp_path / "trains_elsewhere"
    work.mkdir()
    for name in ("model.py", "train.py"):
        shutil.copy(TRAINS_ELSEWHERE / name, work / name)
    (work / ".recompile-fix").mkdir()
    if request.config.getoption("--update-golden"):
        run_cli("profile", "--backend", "eager", "--", "python", "train.py", cwd=work, check=0)
        shutil.copy(work / ".recompile-fix" / "profile.json", TRAINS_ELSEWHERE / "profile.json")
    else:
        shutil.copy(TRAINS_ELSEWHERE / "profile.json", work / ".recompile-fix" / "profile.json")
    return work


def _pending_in_editor(work: Path) -> list[str]:
    """The safe fixes the language server offers in each of the project's files."""
    engine = Engine(work)
    pending = []
    for path in ("model.py", "train.py"):
        analysis = engine.analyze(path, (work / path).read_text())
        pending += [
            f"{path}:{item.finding.rule}"
            for item in analysis.items
            if item.finding is not None and is_selected(item.finding, unsafe_fixes=False)
        ]
    return pending


def test_after_apply_nothing_is_pending_and_rf004_stays_unfixed(trains_elsewhere):
    work = trains_elsewhere
    assert Profile.load(work / ".recompile-fix" / "profile.json").trains is True  # seen at run time
    first = run_cli("apply", ".", cwd=work, check=0)
    assert "mark_dynamic(batch, 0)" in (work / "train.py").read_text()
    # Recorded with --backend eager on torch 2.13, a training program's backward through the
    # region fails (issue 14's failure 7): RF004 gives no fix at all, and says why.
    assert "RF004 [no fix]" in first.stdout and "backward through the region fails" in first.stdout
    model = (work / "model.py").read_text()
    # train.py is now as `apply` left it; the Profile's fact and the backward still in train.py
    # keep RF004 from turning into a fix. Both hooks, and the editor, have nothing to do.
    check = run_cli("apply", ".", "--check", cwd=work, check=0)  # recompile-fix-check
    assert "RF004 [no fix]" in check.stdout and "Would fix 0 finding(s)" in check.stderr
    run_cli("apply", ".", cwd=work, check=0)  # recompile-fix (the fixing hook)
    assert (work / "model.py").read_text() == model
    assert "nested_compile_region" not in model
    assert _pending_in_editor(work) == []


def test_without_the_training_fact_the_second_apply_still_sees_the_training(trains_elsewhere):
    # A Profile recorded before the fact existed: the backward pass in train.py (the file the
    # first apply fixed) still tells RF004 the program trains, so no region is made "safely".
    work = trains_elsewhere
    path = work / ".recompile-fix" / "profile.json"
    data = json.loads(path.read_text())
    del data["trains"]
    path.write_text(json.dumps(data))
    run_cli("apply", ".", cwd=work, check=0)
    again = run_cli("apply", ".", "--check", cwd=work, check=0)
    assert "RF004 [*]" not in again.stdout
    assert "RF004 [no fix]" in again.stdout and "the program trains (`loss.backward()` at train.py" in again.stdout


def test_static_mode_with_a_profile_honours_its_facts(trains_elsewhere):
    # model.py edited since: the Profile no longer matches it, so only the rules that need no
    # Profile run there, and the Profile's fact that the program trains holds for them too.
    work = trains_elsewhere
    (work / "model.py").write_text((work / "model.py").read_text() + "\n# edited\n")
    result = run_cli("apply", "model.py", "--check", cwd=work, check=0)
    assert "model.py:" in result.stdout and "RF004 [unsafe fix]" in result.stdout, result.stdout
    assert "the profiled run ran a backward pass" in result.stdout


STACK_AND_RAGGED = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.relu(self.lin(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


model = Model().eval()
model.compile()
with torch.no_grad():
    for rows in (4, 3):
        batch = torch.randn(rows, 8)
        model(batch)
"""


@pytest.mark.slow
def test_stale_line_agrees_with_the_diff_above_it(tmp_path):
    # A file with a Profile fix (RF001) and a static one (RF004, safe: inference), edited after
    # profiling: the Profile's fix is skipped, the static one is made, and the line says so.
    (tmp_path / "program.py").write_text(STACK_AND_RAGGED)
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    assert "mark_dynamic(batch, 0)" in run_cli("apply", ".", "--diff", cwd=tmp_path, check=1).stdout
    # Without the profiled text kept beside the Profile (an older Profile), an edit anywhere makes
    # the file stale (with it, the findings follow the code: test_anchors.py).
    shutil.rmtree(tmp_path / ".recompile-fix" / "sources")
    (tmp_path / "program.py").write_text(STACK_AND_RAGGED + "# edited\n")
    result = run_cli("apply", ".", "--diff", cwd=tmp_path, check=2)
    assert "+    @torch.compiler.nested_compile_region" in result.stdout and "mark_dynamic" not in result.stdout
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("recompile-fix: error:")]
    assert error == (
        "recompile-fix: error: program.py: changed since it was profiled (its bytes are not the ones the "
        "Profile hashed): stale Profile, its fixes for this file were skipped; run `recompile-fix profile` "
        "again; only the fixes that need no Profile were made"
    )
    # With nothing else to make there, it is left as it is, and the line says that.
    result = run_cli("apply", ".", "--diff", "--ignore", "RF004", cwd=tmp_path, check=2)
    assert result.stdout == "" and result.stderr.count("; not changed") == 1


def test_a_file_edited_after_apply_says_so(trains_elsewhere):
    work = trains_elsewhere
    run_cli("apply", ".", cwd=work, check=0)
    (work / "train.py").write_text((work / "train.py").read_text() + "# edited after apply\n")
    result = run_cli("apply", ".", "--check", cwd=work, check=2)
    assert (
        "train.py: changed since it was profiled (its bytes are neither the ones the Profile hashed nor "
        "the ones `apply` wrote: edited since)" in result.stderr
    )


@pytest.mark.slow
def test_a_failed_run_never_replaces_a_profile(trains_elsewhere):
    # Failure 4: `profile -- python trian.py` (a typo) replaced a good Profile with an empty one.
    work = trains_elsewhere
    kept = work / ".recompile-fix" / "profile.json"
    good = kept.read_text()
    result = run_cli("profile", "--backend", "eager", "--", "python", "trian.py", cwd=work, check=2)
    assert kept.read_text() == good
    beside = work / ".recompile-fix" / "profile.failed.json"
    assert Profile.load(beside).frames == [] and Profile.load(beside).exit_code == 2
    assert (
        "the program compiled nothing under torch.compile and exited with 2; kept the Profile at "
        ".recompile-fix/profile.json and wrote this run's beside it, to .recompile-fix/profile.failed.json"
    ) in result.stderr
    # A run that compiled nothing and succeeded goes beside it too; a Profile of compiles replaces it.
    (work / "plain.py").write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    run_cli("profile", "--", "python", "plain.py", cwd=work, check=0)
    assert kept.read_text() == good and Profile.load(work / ".recompile-fix" / "profile.empty.json").frames == []


def test_a_profile_of_nothing_goes_where_nothing_was(tmp_path):
    from recompile_fix.profile.model import Frame, save_profile

    empty = Profile(command=["python", "x.py"], torch_version="2.13.0", python_version="3.11", exit_code=2)
    assert save_profile(empty, tmp_path / "p.json") == tmp_path / "p.json"  # nothing to lose
    assert save_profile(empty, tmp_path / "p.json") == tmp_path / "p.json"  # an empty one: nothing either
    (tmp_path / "q.json").write_text("not a Profile")
    assert save_profile(empty, tmp_path / "q.json") == tmp_path / "q.json"
    good = Profile(command=["python", "x.py"], torch_version="2.13.0", python_version="3.11")
    good.frames.append(Frame(file="x.py", first_line=1, name="fn"))
    good.sources["x.py"] = "0" * 64
    assert save_profile(good, tmp_path / "p.json") == tmp_path / "p.json"
    assert save_profile(empty, tmp_path / "p.json") == tmp_path / "p.failed.json"
    empty.exit_code = 0
    assert save_profile(empty, tmp_path / "p.json") == tmp_path / "p.empty.json"
    assert Profile.load(tmp_path / "p.json").frames  # still the good one


def test_a_fix_in_the_code_the_profile_ran_is_no_fix_for_its_recompile(tmp_path):
    """The Profile was recorded on the fixed program and the frame still recompiled (a UNet's
    marked sizes still guarded apart): the report says the fix was there, and counts the
    recompile as one no fix removes (a Profile that predates the fix counts it as fixed)."""
    from recompile_fix.profile.model import sha256_bytes

    case = Path(__file__).resolve().parent.parent / "golden" / "RF012" / "stable_key_set"
    data = json.loads((case / "profile.json").read_text())
    fixed = (case / "program.out.py").read_bytes()
    (tmp_path / "program.py").write_bytes(fixed)
    data["sources"]["program.py"] = sha256_bytes(fixed)  # recorded on the fixed code...
    line = fixed.decode().splitlines()[35]
    for compile_ in data["frames"][0]["compiles"]:  # ... where the call ends further right
        compile_["stack"][-1]["end_col"] = line.index("})", compile_["stack"][-1]["col"]) + 2
    (tmp_path / "after.json").write_text(json.dumps(data))
    after = run_cli("report", "after.json", cwd=tmp_path, check=0)
    assert "[no fix]" in after.stdout and "its fix was in the code the Profile ran" in after.stdout
    assert "0 with a proposed fix, 1 with no fix" in after.stdout


def test_report_after_apply_counts_the_fixes_the_files_now_hold(tmp_path):
    """A trial: after `apply`, `report` on the same Profile said "[no fix] ... no rule has a fix"
    for every recompile whose fix the file now held (the rules could not read the file as the run
    had it). They plan on the profiled text kept beside the Profile: the fixes are counted."""
    case = Path(__file__).resolve().parent.parent / "golden" / "RF017" / "last_token_sampler"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    (tmp_path / ".recompile-fix").mkdir()
    shutil.copy(case / "profile.json", tmp_path / ".recompile-fix" / "profile.json")
    shutil.copytree(case / ".profile.sources", tmp_path / ".recompile-fix" / "sources")
    before = run_cli("report", "--output-format", "concise", cwd=tmp_path, check=0)
    run_cli("apply", ".", cwd=tmp_path, check=0)
    assert (tmp_path / "program.py").read_text() == (case / "program.out.py").read_text()
    after = run_cli("report", "--output-format", "concise", cwd=tmp_path, check=0)
    line = next(x for x in before.stdout.splitlines() if x.startswith("Every recompile accounted for"))
    assert ": 0 with a proposed fix" not in line, before.stdout
    assert line in after.stdout, after.stdout
    assert "no rule has a fix" not in after.stdout, after.stdout
