"""The README a user reads in two minutes (issue 28), kept true by running what it shows.

* It is at most 200 lines, and every page it links (docs/, CONTRIBUTING.md ...) exists, as do
  the reference pages the CLI's --help names; the docs pages' own relative links hold too.
* Every `recompile-fix ...` command it or a reference page names (in a code block or inline)
  names a real command and real options (their `--help`): no torch program runs for that.
* The setup, test and torch 2.14.1 lane commands are checked, not run (running the suite from
  inside the suite would recurse; CI runs them): they are what .ci/run extracts, by .ci/run's
  own awk program, and the pytest markers they select on are registered.
* The install lines (pipx, uv tool, pip from git) cannot run offline: their shape is checked
  (each a quoted spec naming the repository, tests/test_install_lines.py the specs themselves).
* The commands that run the tool (slow: they run torch programs) run as written, in bash, on a
  temporary copy of examples/, with `recompile-fix` (and, for the main job's `.venv/bin/`, the
  interpreter) resolving to this checkout's package, as ``run_cli`` runs it: the main job on
  examples/, the picture of the report (whose lines must be the tool's output, seconds aside),
  and the loop on a project, whose exit codes are the ones the README promises.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
# The pages `recompile-fix --help` points at (its epilog): they must exist under these names.
REFERENCE_PAGES = [
    "docs/commands.md",
    "docs/configuration.md",
    "docs/profile.md",
    "docs/rules/README.md",
    "docs/editors.md",
    "docs/torch-releases.md",
]
# Pages whose `recompile-fix ...` commands must name real options (the generated rule and reason
# pages are checked against the rules by tests/test_rule_docs.py).
COMMAND_PAGES = [README, *(ROOT / page for page in REFERENCE_PAGES[:3]), ROOT / "recompile_fix/docs/editors.md"]
CI_PARAGRAPHS = {
    "setup": "Set everything up",
    "tests": "Run the whole test suite",
    "lane_setup": "Set up the torch 2.14.1 lane",
    "lane_tests": "Run the torch 2.14.1 lane",
}
MAIN_JOB = "Run the main job on the bundled example"
# A program of the user's project for the loop: the README's `python train.py --epochs 1`.
TRAIN_PY = """import argparse

import ragged_batch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
for _ in range(parser.parse_args().epochs):
    ragged_batch.main()
"""


def _lines() -> list[str]:
    return README.read_text().splitlines()


def _code_blocks(path: Path = README) -> list[tuple[str, list[str]]]:
    """The document's code blocks in order, ("fenced" | "indented", lines), with the paragraph's
    first line before an indented one kept as its label (``_paragraph_before``)."""
    blocks: list[tuple[str, list[str]]] = []
    fenced: list[str] | None = None
    previous = ""
    for line in path.read_text().splitlines():
        if fenced is not None:
            if line.startswith("```"):
                blocks.append(("fenced", fenced))
                fenced = None
            else:
                fenced.append(line)
        elif line.startswith("```"):
            fenced = []
        elif line.startswith("    ") and (previous == "" or previous.startswith("    ")):
            if previous == "":
                blocks.append(("indented", []))
            blocks[-1][1].append(line[4:])
        previous = line
    return blocks


def _paragraph_command(start: str) -> str:
    """The first indented line after the paragraph that starts with ``start``, as .ci/run reads it."""
    lines = _lines()
    at = next(i for i, line in enumerate(lines) if line.startswith(start))
    return next(line[4:] for line in lines[at + 1 :] if line.startswith("    "))


def _ci_awk_program() -> str:
    found = re.search(r"awk -v start=\"\$1\" '(.*?)' README\.md", (ROOT / ".ci/run").read_text(), re.S)
    assert found, ".ci/run no longer reads the README with awk: update this test"
    return found.group(1)


def _user_commands(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("recompile-fix ")]


# --- the quick checks -----------------------------------------------------------------------


def test_the_readme_is_read_in_two_minutes():
    assert len(_lines()) <= 200, f"README.md has {len(_lines())} lines: move reference text to docs/"


def test_every_page_it_links_exists():
    for page in REFERENCE_PAGES:
        assert (ROOT / page).is_file(), page
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert set(REFERENCE_PAGES) <= set(links), "the README links every reference page"
    for page in [README, *ROOT.glob("docs/*.md")]:
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in link:
                assert (page.parent / link).exists(), f"{page.relative_to(ROOT)} links {link}"


def test_ci_runs_the_readmes_commands():
    """.ci/run's own awk program finds the four commands, and they are the ones the README shows."""
    program = _ci_awk_program()
    for name, start in CI_PARAGRAPHS.items():
        done = subprocess.run(["awk", "-v", f"start={start}", program, str(README)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        command = done.stdout.rstrip("\n")
        assert command and command == _paragraph_command(start), name
        assert any(command in lines for _, lines in _code_blocks()), name
    setup, tests, lane_setup, lane_tests = (_paragraph_command(start) for start in CI_PARAGRAPHS.values())
    assert setup.startswith("python3 -m venv .venv && ") and '.venv/bin/pip install -e ".[test]"' in setup
    for step in (".venv/bin/ruff check .", ".venv/bin/ruff format --check .", "-m pytest"):
        assert step in tests
    # mypy runs among the tests (tests/test_types.py), which the whole suite selects
    assert "not slow" not in tests and (ROOT / "tests" / "test_types.py").is_file()
    assert lane_setup.startswith("python3 -m venv .venv-torch-2.14 && ") and '"torch==2.14.1"' in lane_setup
    assert lane_tests.startswith(".venv-torch-2.14/bin/python -m pytest")


def test_the_three_commands_are_there_and_select_registered_markers():
    """Set up, pass the tests, run the main job on examples/ (the project's rule); every `-m`
    expression of a README command names markers pytest knows (it runs with --strict-markers)."""
    main_job = _paragraph_command(MAIN_JOB)
    assert "examples/" in main_job and main_job.startswith(".venv/bin/recompile-fix profile ")
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    known = {marker.split(":")[0] for marker in markers}
    commands = [line for kind, lines in _code_blocks() if kind == "indented" for line in lines]
    expressions = [e for c in commands if "pytest" in c for e in re.findall(r'-m "([^"]+)"', c)]
    assert len(expressions) >= 3  # the whole suite, the quick lane, the 2.14.1 lane
    for expression in expressions:
        assert set(re.findall(r"\w+", expression)) - {"and", "or", "not"} <= known, expression


def test_the_install_lines_have_the_shape_of_an_install():
    """They cannot run here (no network): each parses as a shell line installing one quoted spec."""
    (install,) = [lines for kind, lines in _code_blocks() if kind == "indented" and "pipx install" in lines[0]]
    tools = []
    for line in install:
        line = re.sub(r"^# or(, [^:]*)?: ", "", line)
        words = shlex.split(line)
        tool = words[: words.index("install")]
        assert tool in (["pipx"], ["uv", "tool"], ["pip"]) and len(words) == len(tool) + 2, line
        assert words[-1] == f"recompile-fix[lsp] @ git+{REPOSITORY}", line
        tools.append(" ".join(tool))
    assert tools == ["pipx", "uv tool", "pip"]


@cache
def _help(*command: str) -> str:
    """`recompile-fix COMMAND --help` (not through ``run_cli``: `verify --help` runs no program)."""
    argv = [sys.executable, "-m", "recompile_fix", *command, "--help"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _mentioned_commands(path: Path) -> list[str]:
    """Every `recompile-fix ...` a page names: inline code and code-block lines (a synopsis's
    `[--flag ARG]` brackets and `|` alternatives kept, they are read below)."""
    text = path.read_text()
    inline = [" ".join(span.split()) for span in re.findall(r"`(recompile-fix [^`]+)`", text)]
    blocks = [line.lstrip("$ ") for _, lines in _code_blocks(path) for line in lines]
    return inline + [line for line in blocks if line.startswith("recompile-fix ")]


def test_every_command_it_names_exists_with_its_options():
    commands = set(re.findall(r"^  (\w+) ", _help(), re.M))
    for path in COMMAND_PAGES:
        for mention in _mentioned_commands(path):
            words = mention.split("#")[0].split()
            name, rest = words[1], words[2:]
            if name.startswith("-"):  # `recompile-fix --help`, `--version`
                assert name in _help(), mention
                continue
            assert name in commands, f"{path.name}: `{mention}`: no command {name!r}"
            rest = rest[: rest.index("--")] if "--" in rest else rest
            for word in rest:
                option = word.strip("[]|").split("=")[0]
                if option.startswith("-") and option not in ("-", "--"):
                    assert re.search(rf"(^|[\s,/]){re.escape(option)}\b", _help(name), re.M), (
                        f"{path.name}: `{mention}`: {name} has no option {option}"
                    )


# --- the commands that run the tool ---------------------------------------------------------


def _shims(where: Path, python: bool = True) -> Path:
    """A folder with `recompile-fix` (this checkout's package, as ``run_cli`` runs it) and, for
    the main job's `.venv/bin/python`, the test environment's interpreter (``python``; else the
    `python` on PATH is the session's own: its warm runner's server is started already, where
    another interpreter's path starts a server of its own)."""
    bin_dir = where / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    scripts = {"recompile-fix": f'exec {shlex.quote(sys.executable)} -m recompile_fix "$@"\n'}
    if python:
        scripts["python"] = f'exec {shlex.quote(sys.executable)} "$@"\n'
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _run(command: str, cwd: Path, bin_dir: Path) -> subprocess.CompletedProcess:
    """``command`` in bash as written, `recompile-fix` first on PATH, this checkout importable."""
    path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PATH": path, "PYTHONPATH": python_path}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)


def _examples_copy(tmp_path: Path) -> Path:
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return work


_SECONDS = re.compile(r"\b\d+\.\d\d\b")  # compile seconds: the one figure that differs by run


@pytest.mark.slow
def test_the_main_job_and_the_picture_run_as_written(tmp_path):
    work = _examples_copy(tmp_path)
    bin_dir = _shims(work)
    done = _run(_paragraph_command(MAIN_JOB), work, bin_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Every recompile accounted for" in done.stdout and "+++ b/examples/" in done.stdout

    (picture,) = [lines for kind, lines in _code_blocks() if kind == "fenced" and lines[0].startswith("$ ")]
    shown: list[tuple[str, list[str]]] = []
    for line in picture:
        if line.startswith("$ "):
            shown.append((line[2:], []))
        elif line != "...":
            shown[-1][1].append(line)
    for command, output in shown:
        assert command.startswith("recompile-fix "), command
        done = _run(command, work, bin_dir)
        # --diff exits 1 while fixes are pending (the picture shows them pending).
        assert done.returncode == (1 if "--diff" in command else 0), command + "\n" + done.stderr[-3000:]
        printed = {_SECONDS.sub("#.##", line) for line in (done.stdout + done.stderr).splitlines()}
        for line in output:
            assert _SECONDS.sub("#.##", line) in printed, f"`{command}` no longer prints: {line}"


def _promised_exit(line: str) -> int:
    """The exit code a README command's comment promises (`# ... (exit 1: fixes pending)`), else 0."""
    found = re.search(r"#.*\(exit (\d)", line)
    return int(found.group(1)) if found else 0


@pytest.mark.slow
def test_the_loop_on_a_project_runs_as_written(tmp_path):
    """The loop's commands, in order, on a project whose `train.py` runs examples/ragged_batch.py
    (its last batch recompiles); then `fix` on a fresh copy of it."""
    loop, fix = [_user_commands(lines) for kind, lines in _code_blocks() if kind == "indented" if _user_commands(lines)]
    assert [c.split()[1] for c in loop] == ["profile", "report", "apply", "verify", "apply", "verify"]
    assert len(fix) == 1 and fix[0].startswith("recompile-fix fix -- ")
    projects = []
    for name in ("loop", "fix"):
        project = _examples_copy(tmp_path / name) / "examples"
        (project / "train.py").write_text(TRAIN_PY)
        projects.append(project)
    bin_dir = _shims(tmp_path, python=False)
    for command in loop:
        done = _run(command, projects[0], bin_dir)
        assert done.returncode == _promised_exit(command), command + "\n" + done.stdout[-3000:] + done.stderr[-3000:]
        if command.startswith("recompile-fix report --html"):
            assert (projects[0] / shlex.split(command)[3]).is_file()
    assert "torch._dynamo.mark_dynamic(data, 0)" in (projects[0] / "ragged_batch.py").read_text()
    assert "Verified against the recorded run" in done.stdout  # the last `verify`, after `apply`

    done = _run(fix[0], projects[1], bin_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "torch._dynamo.mark_dynamic(data, 0)" in (projects[1] / "ragged_batch.py").read_text()
