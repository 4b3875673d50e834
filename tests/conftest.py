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
        cwd=cwd or ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if check is not None:
        assert completed.returncode == check, completed.stdout + completed.stderr
    return completed


@pytest.fixture
def cli():
    return run_cli


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="Re-record golden Profiles and rewrite expected outputs (review the diff!).")
