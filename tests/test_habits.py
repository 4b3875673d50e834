"""People's habits (issue 26 item 7): ruff's `# noqa: RF003` beside `# recompile-fix:
ignore[RF003]`, and fixes written at the line length the project's formatter is set to
([tool.ruff] / ruff.toml / [tool.black] line-length); a project without a formatter keeps its
bytes. No torch run: the golden case's recorded Profile."""

import shutil
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from recompile_fix.edits.format import configured_line_length, format_statement, line_length_of
from recompile_fix.suppression import is_suppressed, strip_suppressions, suppressed_rules

CASE = ROOT / "golden" / "RF003" / "seed_lr_scheduler"
OPT = "opt = torch.optim.Adam(mod.parameters(), lr=0.01)"


def _stage(tmp_path: Path, config: str | None) -> Path:
    work = tmp_path / "proj"
    (work / ".recompile-fix").mkdir(parents=True)
    shutil.copy(CASE / "program.in.py", work / "program.py")
    shutil.copy(CASE / "profile.json", work / ".recompile-fix" / "profile.json")
    if config is not None:
        (work / "pyproject.toml").write_text(config)
    return work


@pytest.mark.parametrize(
    ("line", "rules"),
    [
        ("x = f()  # noqa", set()),
        ("x = f()  # noqa: RF003", {"RF003"}),
        ("x = f()  # NOQA:E501,RF003", {"E501", "RF003"}),
        ("x = f()  # noqa: E501 RF003 -- why", {"E501", "RF003"}),
        ("x = f()  # recompile-fix: ignore[RF001]  # noqa: RF003", {"RF001", "RF003"}),
        ("x = f()  # noqa-like comment", None),
        ("x = f()", None),
    ],
)
def test_noqa_spellings(line, rules):
    assert suppressed_rules(line) == rules
    assert is_suppressed(line, "RF003") == (rules is not None and (not rules or "RF003" in rules))
    if rules is not None:  # a suppression comment added after profiling keeps the Profile fresh
        assert strip_suppressions(line + "\n") == "x = f()\n"


def test_noqa_rf003_is_honoured_and_keeps_the_profile_fresh(tmp_path):
    work = _stage(tmp_path, None)
    program = work / "program.py"
    program.write_text(program.read_text().replace(OPT, OPT + "  # noqa: RF003"))
    done = run_cli("apply", ".", "--check", "--unsafe-fixes", cwd=work, check=0)
    assert "RF003" not in done.stdout and "stale" not in done.stderr
    program.write_text(program.read_text().replace("# noqa: RF003", "# noqa: E501"))
    assert "RF003" in run_cli("apply", ".", "--check", "--unsafe-fixes", cwd=work, check=1).stdout


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, "opt = torch.optim.Adam(mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))\n"),
        (
            "[tool.ruff]\nline-length = 60\n",
            "opt = torch.optim.Adam(\n    mod.parameters(),\n    lr=torch.tensor(0.01, dtype=torch.float64),\n)\n",
        ),
        (
            "[tool.black]\nline-length = 72\n",
            "opt = torch.optim.Adam(\n    mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64)\n)\n",
        ),
        (
            "[tool.ruff]\nline-length = 120\n",
            "opt = torch.optim.Adam(mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))\n",
        ),
    ],
)
def test_a_fixed_statement_follows_the_projects_line_length(tmp_path, config, expected):
    work = _stage(tmp_path, config)
    before = (work / "program.py").read_text()
    run_cli("apply", ".", "--unsafe-fixes", cwd=work, check=0)
    after = (work / "program.py").read_text()
    assert after == before.replace(OPT + "\n", expected)
    limit = configured_line_length(work / "program.py")
    assert limit is None or max(map(len, after.splitlines())) <= limit


def test_inserted_statements_use_the_projects_line_length(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 50\n")
    statement = "torch._dynamo.mark_dynamic(some_long_input_name, 0, min=2, max=4096)"
    with line_length_of(tmp_path / "train.py") as length:
        assert length == 50
        wrapped = format_statement(statement, 4)
    assert max(len(line) for line in wrapped.splitlines()) + 4 <= 50 and "\n" in wrapped
    assert format_statement(statement, 4) == statement  # outside: black's 88


def test_noqa_rf001_beside_the_tools_own_spelling(project):
    """The two-file project: `# noqa: RF001` on one file's call, `# recompile-fix: ignore[RF001]`
    on the other's; both honoured, neither makes the Profile stale; another code in either keeps
    the finding."""
    main, helpers = project / "main.py", project / "helpers.py"
    main.write_text(main.read_text().replace("    fn(torch.ones(n))\n", "    fn(torch.ones(n))  # noqa: RF001\n"))
    helpers.write_text(
        helpers.read_text().replace("        gn(y)\n", "        gn(y)  # recompile-fix: ignore[RF001]\n")
    )
    done = run_cli("apply", ".", "--check", cwd=project, check=0)
    assert "RF001" not in done.stdout and "stale" not in done.stderr and "Would fix 0" in done.stderr
    main.write_text(main.read_text().replace("# noqa: RF001", "# noqa: E501"))
    kept = run_cli("apply", ".", "--check", cwd=project, check=1)
    assert "main.py:12:5: RF001" in kept.stdout and "helpers.py:" not in kept.stdout
