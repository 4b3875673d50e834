"""The type check: mypy as pyproject.toml configures it (strict for the data model and the
pipeline), run as one test of the whole suite, so that it takes one core while pytest-xdist's
other workers run tests, instead of holding the suite up for its 15 s on a cold cache. The
quick lane leaves it out (marked slow); CONTRIBUTING.md's lint line runs it on its own."""

import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


def test_mypy_finds_nothing():
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
