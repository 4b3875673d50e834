"""Fixtures hold in a clone at another path: no golden Profile or recorded fixture names the
recording machine's virtualenv or checkout. Golden Profiles spell library files by import path
(``/site-packages/torch/optim/adam.py``); the release fixtures' raw records use the placeholder
roots tests/fixtures/README.md documents (``/recorded/venv``, ``/recorded/run-tree``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recompile_fix.profile.libraries import is_library_spelling

REPO = Path(__file__).resolve().parent.parent
PLACEHOLDER = "/recorded/"  # tests/fixtures/README.md: where the release fixtures' programs ran
# An absolute path into an environment: its site-packages, dist-packages or a venv folder.
_ENV_PATH = re.compile(r"(?<![\w.])/[^\s\"'\\]*?/(?:site-packages|dist-packages|\.venv|venv|env)/[^\s\"'\\]*")


def _fixture_files() -> list[Path]:
    golden = sorted((REPO / "golden").glob("*/*/profile.json"))
    recorded = sorted(p for p in (REPO / "tests" / "fixtures").rglob("*") if p.suffix in (".json", ".jsonl", ".log"))
    return golden + recorded


def machine_paths(text: str, checkout: str) -> list[str]:
    """The paths in ``text`` that only hold on the recording machine: an environment's files
    under a real root, or the checkout's own absolute path."""
    found = [m for m in _ENV_PATH.findall(text) if not m.startswith(PLACEHOLDER) and not is_library_spelling(m)]
    if checkout in text:
        found.append(checkout)
    return found


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_fixture_names_no_machine_path(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    found = machine_paths(text, str(REPO))
    assert not found, f"{path.relative_to(REPO)} names this machine's paths, e.g. {found[:2]}: re-record it"


def test_golden_profiles_spell_library_files_by_import_path():
    for path in sorted((REPO / "golden").glob("*/*/profile.json")):
        data = json.loads(path.read_text())
        assert "interpreter" not in data, f"{path}: a golden case records no machine's interpreter"
        for file in data.get("sources", {}):
            assert not file.startswith("/") or is_library_spelling(file), f"{path}: {file}"


def test_the_check_catches_a_virtualenv_path():
    """The check itself can fail: the spellings golden Profiles had before library files were
    recorded by import path."""
    assert machine_paths('"/work/main/.venv/lib/python3.11/site-packages/torch/optim/adam.py"', "/x")
    assert machine_paths('"/home/u/proj/venv/lib/python3.11/site-packages/t.py"', "/x")
    assert machine_paths('"/opt/conda/lib/python3.11/dist-packages/t.py"', "/x")
    assert machine_paths('"/srv/ckout/program.py"', "/srv/ckout")
    assert not machine_paths('"/site-packages/torch/optim/adam.py"', "/x")
    assert not machine_paths('"/recorded/venv/lib/python3.11/site-packages/torch/optim/adam.py"', "/x")
