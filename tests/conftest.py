import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"


def run_cli(*args, cwd=None, check=None):
    """Run `recompile-fix ARGS` in a fresh process, as a user would."""
    completed = subprocess.run(
        [sys.executable, "-m", "recompile_fix", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if check is not None:
        assert completed.returncode == check, completed.stdout + completed.stderr
    return completed


@pytest.fixture
def cli():
    return run_cli


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Re-record golden Profiles and rewrite expected outputs (review the diff!).",
    )


MAIN = """import torch

from helpers import run


@torch.compile
def fn(x):
    return x + 1


for n in (3, 4, 5):
    fn(torch.ones(n))
run()
"""
HELPERS = """import torch


@torch.compile
def gn(y):
    return y * 2


def run():
    for n in (6, 7):
        y = torch.ones(n, 2)
        gn(y)
"""


@pytest.fixture(scope="session")
def recorded_project(tmp_path_factory):
    """A two-file project and the Profile the tool recorded on it (copy it before changing it)."""
    project = tmp_path_factory.mktemp("project")
    (project / "main.py").write_text(MAIN)
    (project / "helpers.py").write_text(HELPERS)
    run_cli("profile", "--backend", "eager", "--", "python", "main.py", cwd=project, check=0)
    return project


@pytest.fixture
def project(recorded_project, tmp_path):
    import shutil

    work = tmp_path / "proj"
    shutil.copytree(recorded_project, work)
    return work
