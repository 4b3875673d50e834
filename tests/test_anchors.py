"""Findings anchored to code, not bytes (issue 26 item 2): the two-file project's recorded
Profile (tests/programs/two_files), its profiled texts kept beside it as `profile` keeps them,
then the files edited. Edits elsewhere keep every finding, at the right place; an edit to the
very statement a fix anchors to makes that finding alone stale, in one line."""

import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from conftest import HELPERS, MAIN, ROOT, run_cli
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


def test_texts_no_profile_names_any_longer_are_dropped(tmp_path):
    """Each run after an edit keeps a new text; the old one goes, unless another Profile in
    `.recompile-fix/` still names it."""
    folder = tmp_path / ".recompile-fix"
    folder.mkdir()
    digests = []
    for text in ("x = 1\n", "x = 2\n", "x = 3\n"):
        (tmp_path / "train.py").write_text(text)
        digests.append(hashlib.sha256(text.encode()).hexdigest())
        if text == "x = 2\n":  # another Profile recorded on this text, kept beside
            (folder / "other.json").write_text(json.dumps({"sources": {"train.py": digests[-1]}}))
        profile = Profile.__new__(Profile)
        profile.sources = {"train.py": digests[-1]}
        keep_profiled_sources(profile, folder / "profile.json", tmp_path)
    kept = sorted(p.stem for p in (folder / "sources").glob("*.txt"))
    assert kept == sorted(digests[1:])  # the first text no Profile names; the second, other.json
    run = tmp_path / "run.json"
    keep_profiled_sources(profile, run, tmp_path)
    (tmp_path / "train.py").write_text("x = 4\n")
    profile.sources = {"train.py": hashlib.sha256(b"x = 4\n").hexdigest()}
    keep_profiled_sources(profile, run, tmp_path)
    assert [p.read_text() for p in (tmp_path / ".run.sources").glob("*.txt")] == ["x = 4\n"]


# -- the language server: the same mapping for an unsaved buffer ---------------------------------
def _apply_lsp_edits(text: str, edits) -> str:
    """LSP edits ((start, end) as (line, character), new text) on an ASCII text, last first
    (insertions at one point in the order given, as LSP has them)."""
    lines = text.splitlines(keepends=True)
    starts = [sum(len(line) for line in lines[:i]) for i in range(len(lines) + 1)]
    for _, (((sl, sc), (el, ec)), new) in sorted(enumerate(edits), key=lambda e: (e[1][0], e[0]), reverse=True):
        text = text[: starts[sl] + sc] + new + text[starts[el] + ec :]
    return text


def test_the_language_server_maps_an_unsaved_buffer_as_apply_does(kept, tmp_path):
    from recompile_fix.lsp.engine import Engine

    saved = tmp_path / "saved"
    shutil.copytree(kept, saved)
    _edit_elsewhere(saved)  # the same edits, saved and black-formatted, for `apply`
    edited = (saved / "main.py").read_text()
    engine = Engine(kept, encoding="utf-8")  # main.py on disk is the profiled one: the edit is unsaved
    analysis = engine.analyze("main.py", edited)
    assert not analysis.stale
    (item,) = [i for i in analysis.items if i.rule == "RF001"]
    assert item.range[0] == (edited.splitlines().index("    fn(torch.ones(n))"), 4)
    fixed = _apply_lsp_edits(edited, engine.fix_all(analysis))
    run_cli("apply", ".", cwd=saved, check=0)
    assert fixed == (saved / "main.py").read_text()  # the edit `apply` makes, at the same place
    after = engine.analyze("main.py", fixed)
    assert not after.stale and [i for i in after.items if i.rule == "RF001"] == []


def test_the_language_server_names_the_stale_finding_alone(kept):
    from recompile_fix.lsp.engine import Engine

    engine = Engine(kept, encoding="utf-8")
    changed = "# a comment\n" + MAIN.replace("    fn(torch.ones(n))", "    fn(torch.ones(n) + 1)")
    analysis = engine.analyze("main.py", changed)
    assert [i.message for i in analysis.items] == [
        "main.py:12: `fn(torch.ones(n))` changed since profiling: the evidence of `fn` there is stale, not fixed"
    ]
    helpers = engine.analyze("helpers.py", "# a comment\n" + HELPERS)  # the other file's finding applies
    assert [i.rule for i in helpers.items] == ["RF001"] and helpers.items[0].range[0] == (12, 8)  # one line down


# -- report: the same mapping ----------------------------------------------------------------------
def test_report_shows_edited_files_where_their_code_is_now(kept):
    _edit_elsewhere(kept)
    main = (kept / "main.py").read_text().splitlines()
    call, first = main.index("    fn(torch.ones(n))") + 1, main.index("@torch.compile") + 1
    text = run_cli("report", cwd=kept, check=0)
    assert text.stderr == "" and f"fn (main.py:{first})" in text.stdout
    assert f"main.py:{call}:5: RF001" in text.stdout and "helpers.py:" in text.stdout
    data = json.loads(run_cli("report", "--json", cwd=kept, check=0).stdout)
    assert ("main.py", call) in [(f["file"], f["location"]["line"]) for f in data["findings"]]
    assert ("main.py", first) in [(f["file"], f["line"]) for f in data["frames"]]


def test_report_names_the_stale_frame_and_keeps_it_in_the_table(kept):
    (kept / "main.py").write_text("# a comment\n" + MAIN.replace("    fn(torch.ones(n))", "    fn(torch.ones(n) + 1)"))
    text = run_cli("report", cwd=kept, check=0)
    assert text.stderr == (
        "recompile-fix: main.py:12: `fn(torch.ones(n))` changed since profiling: "
        "the evidence of `fn` there is stale, not fixed\n"
    )
    assert "fn (main.py:6)" in text.stdout and "gn (helpers.py:4)" in text.stdout  # both frames, as recorded
    fixes = text.stdout.split("Fixes", 1)[1]
    assert "helpers.py:12:9: RF001" in fixes and "main.py:" not in fixes.split("Every recompile")[0]


# -- the texts beside the Profile that was read: --profile elsewhere, verify's and fix's copies -----
def test_a_profile_named_with_profile_maps_through_the_texts_beside_it(project):
    (project / "ci").mkdir()
    path = project / "ci" / "run.json"
    shutil.move(project / ".recompile-fix" / "profile.json", path)
    keep_profiled_sources(Profile.load(path), path, project)
    _edit_elsewhere(project)
    checked = run_cli("apply", ".", "--check", "--profile", "ci/run.json", cwd=project, check=1)
    assert checked.stdout.count("RF001") == 2 and "stale" not in checked.stderr, checked.stderr


def test_a_copy_of_the_project_maps_through_the_texts_beside_the_profile(kept, tmp_path):
    """`verify` and `fix` plan on a copy of the project that has no .recompile-fix/: the texts
    are found beside the Profile they read."""
    from recompile_fix.rules import ALL_RULES
    from recompile_fix.verify.prove import plan_fixes
    from recompile_fix.verify.tree import Checkout

    _edit_elsewhere(kept)
    profile = Profile.load(kept / ".recompile-fix" / "profile.json")
    work = Checkout.of(kept, profile).copy_to(tmp_path / "copy")
    assert not (work.root / ".recompile-fix").exists()
    fixes, errors = plan_fixes(work.cwd, profile, ALL_RULES)
    call = (kept / "main.py").read_text().splitlines().index("    fn(torch.ones(n))") + 1
    inner = (kept / "helpers.py").read_text().splitlines().index("        gn(y)  # the call") + 1
    assert errors == [] and sorted((f.file, f.location.line) for f in fixes) == [
        ("helpers.py", inner),
        ("main.py", call),
    ]


def test_a_header_line_over_a_guard_that_names_its_first_use(tmp_path):
    """A scalar's guard text names the line that first used it (`# program.py:40 in forward`);
    the Profile's copy mapped onto the edited file names the line where it is now. Both are
    right: a header line over it is no damaged Profile (was exit 2: "says `guidance_scale` was
    first used at line 41 ...; its text says line 40")."""
    case = ROOT / "golden" / "RF002" / "dit_guidance_scale"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    (tmp_path / ".recompile-fix").mkdir()
    path = tmp_path / ".recompile-fix" / "profile.json"
    shutil.copy(case / "profile.json", path)
    keep_profiled_sources(Profile.load(path), path, tmp_path)
    before = run_cli("apply", ".", "--unsafe-fixes", "--diff", cwd=tmp_path, check=1).stdout
    program = tmp_path / "program.py"
    program.write_text("# Copyright the authors.\n" + program.read_text())
    for argv in (["report"], ["apply", ".", "--check"]):
        done = run_cli(*argv, cwd=tmp_path, check=None)
        assert done.returncode in (0, 1) and "damaged" not in done.stderr, done.stderr
    after = run_cli("apply", ".", "--unsafe-fixes", "--diff", cwd=tmp_path, check=1).stdout
    changed = [line for line in after.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [line for line in before.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
