"""scripts/new_rule.py, the new-rule scaffold: what it makes passes the tests that cover rules as
generated (in a copy of the repository, with a fresh id), and it refuses a bad or taken id, a bad
name and a target that exists, in one line with exit 2."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SCAFFOLD = Path("scripts") / "new_rule.py"
NAME = "made_by_scaffold"


def _copy_repository(to: Path) -> None:
    """The repository's files as git sees them (tracked, and new ones not ignored), links as links."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source, target = ROOT / name, to / name
        if not source.exists() and not source.is_symlink():  # deleted in the work tree, not yet in git
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)


def _free_id(root: Path) -> str:
    numbers = [int(p.name[2:5]) for p in (root / "rules").glob("rf[0-9][0-9][0-9]_*")]
    return f"RF{max(numbers) + 1:03d}"


def _scaffold(copy: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [sys.executable, str(copy / SCAFFOLD), *args], cwd=copy, env=env, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory):
    """A copy of the repository with a new rule scaffolded in it: (copy, id)."""
    copy = tmp_path_factory.mktemp("repository")
    _copy_repository(copy)
    rule_id = _free_id(copy)
    made = _scaffold(copy, rule_id, NAME)
    assert made.returncode == 0, made.stderr
    return copy, rule_id


@pytest.mark.slow  # pytest in a copy of the repository: about 10 s
def test_the_scaffold_passes_the_rule_tests_as_generated(scaffolded):
    copy, rule_id = scaffolded
    folder = copy / "rules" / f"{rule_id.lower()}_{NAME}"
    case = copy / "golden" / rule_id / NAME
    assert {p.name for p in folder.iterdir()} >= {"__init__.py", "rule.py"}
    assert {p.name for p in case.iterdir()} == {"case.toml", "program.in.py", "program.out.py", "profile.json"}
    assert (copy / "docs" / "rules" / f"{rule_id}.md").is_file() and (copy / "tests" / f"test_{rule_id.lower()}.py")
    tests = [
        "tests/test_rules.py",
        "tests/test_rule_docs.py",
        "tests/test_rule_examples.py",
        "tests/test_layout.py",
        f"tests/test_golden.py::test_golden_apply[{rule_id}/{NAME}]",
        f"tests/test_{rule_id.lower()}.py",
        "tests/test_new_rules.py::test_docs_mention_every_rule",
        "tests/test_reason_docs.py::test_reason_pages_are_generated_from_the_registry",
        "tests/test_releases.py::test_docs_table_is_what_the_rules_declare",
        "tests/test_releases.py::test_every_api_a_fix_writes_is_declared",
    ]
    # The tests parametrized by rule run for the new rule alone (the others' pass in the suite);
    # the wheel test builds a wheel: minutes, and no rule's own.
    per_rule = ("test_example_is_what_the_rule_does_to_its_golden_case", "test_rule_docs_have_every_section_in_order")
    only = f"not wheel and (not ({' or '.join(per_rule)}) or {rule_id})"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "not slow"]
        + ["-k", only, *tests],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
    )
    # The new rule's own node ids are named: a missing one is an error, not a test skipped; and
    # its parametrized cases ran (the -k expression did not leave them out).
    assert run.returncode == 0 and " passed" in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]
    assert all(f"{name}[{rule_id}" in run.stdout for name in per_rule), run.stdout[-3000:]


@pytest.mark.slow  # the copy of the repository
def test_the_scaffold_refuses_a_taken_id_a_bad_one_and_a_dirty_target(scaffolded):
    copy, rule_id = scaffolded
    following = f"RF{int(rule_id[2:]) + 1:03d}"
    (copy / "golden" / following).mkdir()
    refusals = [
        ((rule_id, "another"), f"{rule_id} is taken by rules/{rule_id.lower()}_{NAME}/"),
        (("RF001", "another"), "RF001 is taken"),
        (("R12", "another"), "is not a rule id"),
        (("RF1234", "another"), "is not a rule id"),
        ((following, "Bad Name"), "is not a rule name"),
        ((following, "another"), f"golden/{following} already exists"),
    ]
    for args, why in refusals:
        refused = _scaffold(copy, *args)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        assert refused.stderr.startswith("new_rule: ") and why in refused.stderr, (args, refused.stderr)
        assert refused.stderr.count("\n") == 1 and not refused.stdout, refused.stderr
    assert not list((copy / "rules").glob(f"{following.lower()}_*")), "a refusal wrote files"
