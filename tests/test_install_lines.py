"""The install lines people copy (README, the editor guide) name what installs: recompile-fix is
not on PyPI, so each names the repository the package metadata names, or a checkout. The slow
test that builds, checks and installs the wheel is tests/test_user_install.py."""

import re
import tomllib

from conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REPOSITORY = PYPROJECT["project"]["urls"]["Repository"]
DOCUMENTS = [ROOT / "README.md", ROOT / "recompile_fix" / "docs" / "editors.md"]
INSTALL = re.compile(r"\b(pipx install|uv tool install|pip install)\s+'([^']*)'")


def _install_lines() -> list[tuple[str, str, str]]:
    found = []
    for document in DOCUMENTS:
        for tool, spec in INSTALL.findall(document.read_text()):
            if "recompile-fix" in spec or spec.startswith("."):
                found.append((document.name, tool, spec))
    return found


def test_every_install_line_names_the_repository_or_a_checkout():
    lines = _install_lines()
    assert {tool for _, tool, _ in lines} == {"pipx install", "uv tool install", "pip install"}
    for where, tool, spec in lines:
        assert spec in (f"recompile-fix[lsp] @ git+{REPOSITORY}", ".[lsp]"), f"{where}: {tool} '{spec}'"
    readme = [(tool, spec) for where, tool, spec in lines if where == "README.md"]
    for tool in ("pipx install", "uv tool install", "pip install"):  # each tool, both ways
        assert (tool, ".[lsp]") in readme and (tool, f"recompile-fix[lsp] @ git+{REPOSITORY}") in readme


def test_the_metadata_has_a_version_and_the_projects_urls():
    project = PYPROJECT["project"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert REPOSITORY == "https://github.com/recompile-fix/recompile-fix"
    assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(project["urls"])
    from recompile_fix.rule_docs import REPOSITORY as LINKED  # the rule pages link the same place

    assert LINKED == REPOSITORY
