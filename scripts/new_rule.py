"""Scaffold a new rule: ``python scripts/new_rule.py RF012 short_name``.

Makes everything the test suite checks per rule, so the scaffold passes it as generated, and the
contributor fills it in (CONTRIBUTING.md, "Add a rule"):

* ``rules/rf012_short_name/``: ``__init__.py`` exporting ``RULE``, and ``rule.py``, a Rule whose
  docstring has every section (placeholder text that says what to write), a ``plan`` that finds
  nothing yet, and one example excerpting the golden case;
* ``golden/RF012/short_name/``: ``program.in.py`` (a placeholder program), ``profile.json`` (a
  Profile of that program with no compiles, built from the tool's own model, no torch run),
  ``program.out.py`` (the input: the case expects no change) and ``case.toml`` (``changes = false``);
* ``tests/test_rf012.py``: a test of the rule's decisions on a hand-written Profile
  (``tests/profiles.py``);
* ``docs/rules/RF012.md`` and the rules index, generated as ``pytest tests/test_rule_docs.py
  --update-golden`` does, and a row in the README's rule table.

It refuses (one line, exit 2) a malformed id or name, an id another rule has, and a target that
already exists. A contributor tool: not shipped in the wheel.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from string import Template

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ScaffoldError", "main", "scaffold"]

_ID = re.compile(r"RF\d{3}")
_NAME = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*")
_README_ROW = re.compile(r"^\| (RF\d{3}) \|", re.MULTILINE)


class ScaffoldError(Exception):
    """Why the scaffold refuses: one line for the contributor."""


_INIT = '''"""$rule_id $name, one folder: ``rule`` holds the rule (its docs, examples and logic)."""

from .rule import RULE

__all__ = ["RULE"]
'''

_RULE = '''"""$rule_id $name: TODO one or two sentences: the recompile this rule removes and how."""

from __future__ import annotations

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import Finding
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Profile

__all__ = ["RULE", "$class_name"]


class $class_name(Rule):
    """
    ## What it does
    TODO: what the rule finds and the edit it makes, in one paragraph (its first paragraph is the
    rule's summary in docs/rules/README.md): the construct, and the code it writes where.

    ## Why is this bad?
    TODO: why the construct recompiles (the guard torch installs, and the text it fails with)
    and what the recompiles cost: compiles measured before and after, on which torch.

    ## Example
    ```python
    # TODO: a few lines of the construct, as a user writes it
    ```
    Use instead:
    ```python
    # TODO: the same lines as the fix leaves them
    ```

    ## Fix safety
    TODO: when the fix is safe (the program computes the same tensors), when it is unsafe
    (`--unsafe-fixes`) and why, and where the rule makes no edit and what it says instead.

    ## Profile evidence
    TODO: what the rule reads in the Profile: the reason kinds (guard texts), the recorded inputs
    or sizes, the frames; and what it decides from the source alone.
    """

    id = "$rule_id"
    name = "$name"
    message = "TODO: one line a finding shows, e.g. `{source}` changes between calls of compiled `{frame}`"
    # The reason kinds it turns into fixes (REASON_KINDS in recompile_fix/profile/model.py); with
    # none, the rule works from the source alone (plan_static).
    consumes: tuple[str, ...] = ()
    # Substrings a file must hold for the rule to fire there (static mode skips the others).
    triggers: tuple[str, ...] = ()
    # Until fix() writes edits: a rule that only reports. Set False with the first example whose
    # `after` is what the fix writes.
    finding_only = True
    examples = (
        Example(before=$before, after=None, golden="$golden"),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        """Findings from the Profile: TODO (`project.source(path)` is a file as profiled)."""
        return []

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        """Findings from the source alone: TODO, or delete it once `consumes` names reason kinds."""
        return []

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        """The edits for one Finding: TODO (character offsets into `source.text`)."""
        return []


RULE = $class_name()
'''

_PROGRAM = '''"""golden/$golden: TODO a small program that shows the recompile $rule_id fixes (seeded,
CPU, a second or two); `pytest tests/test_golden.py --update-golden -k $rule_id` records its
profile.json and writes program.out.py."""

import torch


def fn(x):
    return x + 1


compiled = torch.compile(fn, backend="eager")
print(compiled(torch.ones(3)))
'''
_EXAMPLE_BEFORE = 'compiled = torch.compile(fn, backend="eager")\n'

_CASE = """# golden/$golden: what `apply` and the rewritten program must do (tests/golden_cases.py).
# TODO: drop `changes = false` once the rule fixes this case (and add a negative case beside it).
changes = false  # a negative case: the output is the input
"""

_TEST = '''"""$rule_id $name: the rule's decisions on hand-written Profiles (tests/profiles.py), no torch run."""

from profiles import frame_of, project_of
from recompile_fix.rules import rule_by_id

RULE = rule_by_id("$rule_id")

PROGRAM = """\\
import torch


def fn(x):
    return x + 1


compiled = torch.compile(fn)
compiled(torch.ones(3))
"""


def test_no_finding_where_nothing_recompiles(tmp_path):
    """TODO: a test per decision: the Finding the rule makes (its safety, params and notes), and
    where it makes none."""
    profile, project = project_of(tmp_path, {"program.py": PROGRAM}, frame_of(name="fn", first_line=4))
    assert RULE.plan(profile, project) == []
'''


def scaffold(rule_id: str, name: str, root: Path = ROOT) -> list[Path]:
    """Write the new rule's files under ``root``; the paths written, in order."""
    rule_id, snake = _check(rule_id, name, root)
    folder = root / "rules" / f"{rule_id.lower()}_{snake}"
    case = root / "golden" / rule_id / snake
    test = root / "tests" / f"test_{rule_id.lower()}.py"
    fields = {
        "rule_id": rule_id,
        "name": snake.replace("_", "-"),
        "class_name": "".join(part.title() for part in snake.split("_")),
        "golden": f"{rule_id}/{snake}",
        "before": repr(_EXAMPLE_BEFORE),
    }
    folder.mkdir(parents=True)
    case.mkdir(parents=True)
    written = [
        _write(folder / "__init__.py", _INIT, fields),
        _write(folder / "rule.py", _RULE, fields),
        _write(case / "program.in.py", _PROGRAM, fields),
        _write(case / "program.out.py", _PROGRAM, fields),
        _write(case / "case.toml", _CASE, fields),
        _write(test, _TEST, fields),
    ]
    written.append(_write_profile(case, root))
    written.append(_add_readme_row(root / "README.md", rule_id))
    written.extend(_write_docs(root))
    return written


def _check(rule_id: str, name: str, root: Path) -> tuple[str, str]:
    """The id (upper case) and the folder's name (snake case), or why not."""
    rule_id = rule_id.upper()
    if not _ID.fullmatch(rule_id):
        raise ScaffoldError(f"{rule_id!r} is not a rule id: RF and three digits (RF012)")
    if not _NAME.fullmatch(name) or len(name) > 40:
        raise ScaffoldError(f"{name!r} is not a rule name: lower-case words joined by _ or - (guard_dropping)")
    snake = name.replace("-", "_")
    taken = sorted((root / "rules").glob(f"{rule_id.lower()}_*"))
    if taken:
        raise ScaffoldError(f"{rule_id} is taken by rules/{taken[0].name}/: the next free id is {_next_id(root)}")
    targets = [
        root / "golden" / rule_id,
        root / "docs" / "rules" / f"{rule_id}.md",
        root / "tests" / f"test_{rule_id.lower()}.py",
    ]
    for target in targets:
        if target.exists():
            raise ScaffoldError(f"{target.relative_to(root)} already exists: remove what an earlier scaffold left")
    readme = (root / "README.md").read_text(encoding="utf-8")
    if not _README_ROW.search(readme):
        raise ScaffoldError("README.md has no rule table (rows `| RF001 | ...`) to add the rule to")
    if f"| {rule_id} |" in readme:
        raise ScaffoldError(f"README.md's rule table already has a row for {rule_id}: remove it first")
    return rule_id, snake


def _next_id(root: Path) -> str:
    numbers = [int(p.name[2:5]) for p in (root / "rules").glob("rf[0-9][0-9][0-9]_*")]
    return f"RF{max(numbers, default=0) + 1:03d}"


def _write(path: Path, template: str, fields: dict[str, str]) -> Path:
    path.write_text(Template(template).substitute(fields), encoding="utf-8")
    return path


def _write_profile(case: Path, root: Path) -> Path:
    """The case's Profile: the program as it is (its hash), run once with no compile recorded. The
    tool's own model writes it, so it is valid as generated; the first `--update-golden` records
    the real one."""
    _import_from(root)
    from recompile_fix import __version__
    from recompile_fix.profile.model import Profile, sha256_bytes

    program = (case / "program.in.py").read_bytes()
    profile = Profile(
        command=["python", "program.py"],
        torch_version=None,  # not run: no torch recorded it
        python_version=".".join(map(str, sys.version_info[:3])),
        sources={"program.py": sha256_bytes(program)},
        exit_code=0,
        tool_version=__version__,
    )
    path = case / "profile.json"
    profile.dump(path)
    return path


def _add_readme_row(readme: Path, rule_id: str) -> Path:
    """A row in the README's rule table, in id order."""
    text = readme.read_text(encoding="utf-8")
    rows = list(_README_ROW.finditer(text))  # _check saw at least one
    after = [row for row in rows if row.group(1) < rule_id]
    at = text.index("\n", after[-1].start()) + 1 if after else rows[0].start()
    row = f"| {rule_id} | TODO: what the Profile shows (the guard text) | TODO: the fix, and where it makes none |\n"
    readme.write_text(text[:at] + row + text[at:], encoding="utf-8")
    return readme


def _write_docs(root: Path) -> list[Path]:
    """docs/rules/ (the new page, the index) and docs/reasons/, as `--update-golden` writes them."""
    _import_from(root)
    from recompile_fix.reason_docs import write_reason_pages
    from recompile_fix.rule_docs import write_pages
    from recompile_fix.rules import ALL_RULES

    changed = [root / "docs" / "rules" / name for name in write_pages(root / "docs" / "rules", ALL_RULES)]
    changed += [root / "docs" / "reasons" / name for name in write_reason_pages(root / "docs" / "reasons", ALL_RULES)]
    return changed


def _import_from(root: Path) -> None:
    """Import recompile_fix from ``root`` (not an installed copy), with the new folder in it."""
    if sys.path[0] != str(root):
        sys.path.insert(0, str(root))
    loaded = sys.modules.get("recompile_fix")
    if loaded is not None and Path(loaded.__file__ or "").resolve().parent != root / "recompile_fix":
        raise ScaffoldError(f"recompile_fix is already imported from {loaded.__file__}, not from {root}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaffold a new rule (CONTRIBUTING.md, 'Add a rule').")
    parser.add_argument("rule_id", help="the next free id, e.g. RF012")
    parser.add_argument("name", help="a short name in snake case, e.g. guard_dropping (the rule's name is kebab case)")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.rule_id, args.name)
    except ScaffoldError as exc:
        print(f"new_rule: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path.relative_to(ROOT))
    rule_id = args.rule_id.upper()
    print(
        f"\nNow fill in the TODOs (CONTRIBUTING.md, 'Add a rule'), record the golden case with\n"
        f"  pytest tests/test_golden.py --update-golden -k {rule_id}\n"
        f"regenerate the docs with\n"
        f"  pytest tests/test_rule_docs.py tests/test_reason_docs.py tests/test_releases.py --update-golden\n"
        f"and add a line to CHANGELOG.md."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
