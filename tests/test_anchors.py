"""Findings anchored to code, not bytes (issue 26 item 2): the two-file project's recorded
Profile (tests/programs/two_files), its profiled texts kept beside it as `profile` keeps them,
then the files edited. Edits elsewhere keep every finding, at the right place; an edit to the
very statement a fix anchors to makes that finding alone stale, in one line."""

import hashlib
import shutil
import subprocess
import sys

import pytest

from conftest import HELPERS, MAIN, run_cli
from recompile_fix.profile.kept_sources import keep_profiled_sources, kept_source
from recompile_fix.profile.model import Profile


@pytest.fixture
def nested(project):
    """The two-file project with its helper in ``pkg/`` (as test_project_layout lays it out)."""
    (project / "pkg").mkdir()
    shutil.move(project / "helpers.py", project / "pkg" / "helpers.py")
    path = project / ".recompile-fix" / "profile.json"
    path.write_text(path.read_text().replace('"helpers.py"', '"pkg/helpers.py"'))
    return project


@pytest.fixture
def kept(project):
    path = project / ".recompile-fix" / "profile.json"
    keep_profiled_sources(Profile.load(path), path, project)
    assert len(list((project / ".recompile-fix" / "sources").iterdir())) == 2
    return project


def _black(*files):
    subprocess.run([sys.executable, "-m", "black", "-q", *map(str, files)], check=True)


def _edit_elsewhere(project):
    """A docstring, comments, a new function 40 lines long, black over both files."""
    main = MAIN.replace("@torch.compile\ndef fn(x):\n", "@torch.compile\ndef fn(x):\n    # one more\n")
    padding = "\n".join(f"SETTING_{i} = {i}" for i in range(40))
    main = main.replace("\nfor n in", f"\n{padding}\n\n\ndef unused():\n    return 1\n\n\nfor n in", 1)
    (project / "main.py").write_text('"""The script."""\n# a comment\n' + main)
    (project / "helpers.py").write_text(
        '"""Helpers."""\n' + HELPERS.replace("        gn(y)", "        gn(y)  # the call")
    )
    _black(project / "main.py", project / "helpers.py")


def test_edits_elsewhere_keep_every_finding_at_its_place(kept):
    before = run_cli("apply", ".", "--check", cwd=kept, check=1).stdout
    _edit_elsewhere(kept)
    main = (kept / "main.py").read_text()
    line = main.splitlines().index("    fn(torch.ones(n))") + 1
    assert line >= 12 + 40  # the finding moved 40 lines down (and more)
    checked = run_cli("apply", ".", "--check", cwd=kept, check=1)
    assert "stale" not in checked.stderr and "changed since" not in checked.stderr, checked.stderr
    assert f"main.py:{line}:5: RF001" in checked.stdout and "helpers.py:" in checked.stdout
    assert checked.stdout.count("RF001") == before.count("RF001") == 2
    run_cli("apply", ".", cwd=kept, check=0)
    fixed = (kept / "main.py").read_text().splitlines()
    assert fixed[line - 1 : line + 2] == [
        "    x = torch.ones(n)",
        "    torch._dynamo.mark_dynamic(x, 0)",
        "    fn(x)",
    ]
    assert "torch._dynamo.mark_dynamic(y, 0)" in (kept / "helpers.py").read_text()
    run_cli("apply", ".", "--check", cwd=kept, check=0)  # the fixes are in: nothing pending


def test_an_edit_to_the_anchored_statement_makes_that_finding_alone_stale(kept):
    (kept / "main.py").write_text("# a comment\n" + MAIN.replace("    fn(torch.ones(n))", "    fn(torch.ones(n) + 1)"))
    checked = run_cli("apply", ".", "--check", cwd=kept, check=2)
    stale = [line for line in checked.stderr.splitlines() if "main.py" in line]
    assert stale == [
        "recompile-fix: error: main.py:12: `fn(torch.ones(n))` changed since profiling: "
        "the evidence of `fn` there is stale, not fixed"
    ]
    assert "helpers.py:" in checked.stdout and "main.py:" not in checked.stdout  # the other still applies


def test_without_the_profiled_text_an_edited_file_is_stale_as_before(kept):
    shutil.rmtree(kept / ".recompile-fix" / "sources")
    (kept / "main.py").write_text("# a comment\n" + MAIN)
    checked = run_cli("apply", ".", "--check", cwd=kept, check=2)
    assert "main.py: changed since it was profiled" in checked.stderr


def test_edited_and_reformatted_from_the_root_and_from_the_subfolder(nested):
    path = nested / ".recompile-fix" / "profile.json"
    keep_profiled_sources(Profile.load(path), path, nested)
    helpers = nested / "pkg" / "helpers.py"
    helpers.write_text('"""Helpers."""\n\n\ndef unused():\n    return 0\n' + HELPERS.replace("(n, 2)", "(n,2)"))
    (nested / "main.py").write_text("# a comment\n" + MAIN)
    _black(helpers, nested / "main.py")
    root = run_cli("apply", ".", "--check", cwd=nested, check=1)
    assert root.stdout.count("RF001") == 2 and "stale" not in root.stderr, root.stderr
    sub = run_cli("apply", ".", "--check", cwd=nested / "pkg", check=1)
    line = helpers.read_text().splitlines().index("        gn(y)") + 1
    assert f"pkg/helpers.py:{line}:9: RF001" in sub.stdout and "Would fix 1 finding(s)" in sub.stderr
    run_cli("apply", ".", cwd=nested / "pkg", check=0)
    assert helpers.read_text().splitlines()[line - 1] == "        torch._dynamo.mark_dynamic(y, 0)"


def test_kept_texts_are_never_python_files_of_the_project(tmp_path):
    """`profile -o run.json` keeps the profiled texts beside it, hidden and not as `.py`: `apply .`
    and the user's tools never take them for the project's code."""
    (tmp_path / "train.py").write_text("x = 1\n")
    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    profile = Profile.__new__(Profile)
    profile.sources = {"train.py": digest}
    for where in (tmp_path / "run.json", tmp_path / ".recompile-fix" / "profile.json"):
        keep_profiled_sources(profile, where, tmp_path)
        assert kept_source(where, digest).read_text() == "x = 1\n"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py")) == ["train.py"]
    assert kept_source(tmp_path / "run.json", digest).parent.name == ".run.sources"
