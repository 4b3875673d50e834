"""Installed the way people install ruff: recompile-fix in an environment of its own (pipx,
`uv tool`, a separate venv) that has no torch, run against a program whose torch lives in the
user's environment, the one on PATH.

The tool's venv is built once per session from the wheel (pip install --no-deps, then libcst,
click and black at the test environment's versions); the test environment plays the user's.
The user's program also makes the tool's own dependencies unimportable before it imports torch:
what recompile-fix puts into the user's processes must run without them."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from conftest import ROOT, seed
from equivalence import RUNS_DIR_ENV
from recompile_fix.profile.model import Profile

pytestmark = pytest.mark.slow

USER_BIN = Path(sys.executable).parent  # the user's environment: the test venv, with torch
TOOL_DEPENDENCIES = ("libcst", "click", "black")
DIST = "tool-dist"  # beside the tool's venv: what `python -m build` made

# Prepended to the user's program: from here on, importing the tool's dependencies fails, as it
# would in a virtualenv that has only torch; and nothing may have imported them before.
ABSENT_TOOL_DEPENDENCIES = """\
import sys


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"libcst", "click", "black", "pygls"}:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the user's environment)")
        return None


assert not [m for m in sys.modules if m.split(".")[0] in {"libcst", "click", "black", "pygls"}]
sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.fixture(scope="session")
def tool_venv(tmp_path_factory) -> Path:
    """A venv holding recompile-fix and its own dependencies only: no torch. Built once per
    session: pytest-xdist's workers share it (the first builds it under a lock)."""
    shared = os.environ.get(RUNS_DIR_ENV)
    work = Path(shared) if shared else tmp_path_factory.mktemp("tool-venv")
    venv = work / "tool-venv"
    with open(work / "tool-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "ready").exists():
            _build_tool_venv(work, venv)
            (venv / "ready").write_text("")
    return venv


def _build_tool_venv(work: Path, venv: Path) -> None:
    def run(*argv):
        done = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    # Built as a release is, `python -m build` (the sdist, then the wheel from the sdist), from
    # a copy of the sources (the rules link followed), not in the tree: another test may be
    # building there.
    source = work / "tool-source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    shutil.copytree(ROOT / "recompile_fix", source / "recompile_fix", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = work / DIST
    run(sys.executable, "-m", "build", "-o", dist, source)
    run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    (wheel,) = dist.glob("recompile_fix-*.whl")
    run(sys.executable, "-m", "venv", venv)
    # Installed with its dependencies as pip resolves them from the wheel's metadata, at the
    # test environment's versions of the tool's own.
    constraints = work / "tool-constraints.txt"
    constraints.write_text("".join(f"{name}=={metadata.version(name)}\n" for name in TOOL_DEPENDENCIES))
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", constraints, wheel)


def _tool(venv: Path, *args, cwd: Path, path_first: Path):
    """`recompile-fix ARGS` from the tool's venv (not on PATH, as pipx links it), with
    ``path_first`` first on PATH: the environment the user's shell has activated."""
    rest = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != USER_BIN]
    env = {**os.environ, "PATH": os.pathsep.join([str(path_first), *rest])}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(venv / "bin" / "recompile-fix"), *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env
    )


def test_tool_venv_has_no_torch(tool_venv):
    done = subprocess.run([tool_venv / "bin" / "python", "-c", "import torch"], capture_output=True, text=True)
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr


def test_the_built_distributions_name_the_project(tool_venv):
    """`python -m build` made an sdist and a wheel (both passed `twine check --strict`, and the
    wheel is what the tool's venv runs): a version, the project's URLs, the lsp extra."""
    dist = tool_venv.parent / DIST
    (sdist,) = dist.glob("recompile_fix-*.tar.gz")
    (wheel,) = dist.glob("recompile_fix-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        meta = archive.read(name).decode()
    version = metadata.version("recompile-fix")
    assert f"Version: {version}\n" in meta and sdist.name == f"recompile_fix-{version}.tar.gz"
    assert "Project-URL: Repository, https://github.com/recompile-fix/recompile-fix\n" in meta
    assert "Provides-Extra: lsp\n" in meta and "Requires-Python: >=3.11\n" in meta
    with tarfile.open(sdist) as archive:  # the rules ship inside the package, the link followed
        assert f"recompile_fix-{version}/recompile_fix/rules/rf001_mark_dynamic/rule.py" in archive.getnames()
    shown = subprocess.run([tool_venv / "bin" / "recompile-fix", "--version"], capture_output=True, text=True)
    assert shown.stdout.strip().endswith(version)


def test_profile_apply_verify_from_the_tools_own_venv(tool_venv, tmp_path):
    (tmp_path / "train.py").write_text(ABSENT_TOOL_DEPENDENCIES + "\n" + seed("shape_change.py").read_text())
    original = (tmp_path / "train.py").read_text()

    profiled = _tool(
        tool_venv, "profile", "--backend", "eager", "--", "python", "train.py", cwd=tmp_path, path_first=USER_BIN
    )
    assert profiled.returncode == 0, profiled.stdout + profiled.stderr
    assert "recorder not started" not in profiled.stderr
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    assert profile.frame("fn") is not None and len(profile.frame("fn").compiles) == 2
    import torch

    assert profile.torch_version == torch.__version__  # the user's torch, read in the user's process

    diff = _tool(tool_venv, "apply", ".", "--diff", cwd=tmp_path, path_first=USER_BIN)
    assert diff.returncode == 1, diff.stdout + diff.stderr  # fixes pending
    assert "+torch._dynamo.mark_dynamic(" in diff.stdout

    verified = _tool(tool_venv, "verify", cwd=tmp_path, path_first=USER_BIN)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "Verified" in verified.stdout

    applied = _tool(tool_venv, "apply", ".", cwd=tmp_path, path_first=USER_BIN)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    fixed = (tmp_path / "train.py").read_text()
    assert fixed != original and "torch._dynamo.mark_dynamic(" in fixed


def test_the_tools_own_python_without_torch_is_one_line(tool_venv, tmp_path):
    """The issue's first run: `python` was recompile-fix's interpreter, which has no torch."""
    (tmp_path / "train.py").write_text(seed("shape_change.py").read_text())
    result = _tool(tool_venv, "profile", "--", "python", "train.py", cwd=tmp_path, path_first=tool_venv / "bin")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"recompile-fix: error: {tool_venv / 'bin' / 'python'} cannot import torch: ")
    assert not (tmp_path / ".recompile-fix").exists()


def test_static_mode_from_the_tools_own_venv_knows_the_users_torch(tool_venv, tmp_path):
    """Issue 30, cause 8: no Profile, and the tool's venv has no torch: the release that gates
    RF004's nested_compile_region (2.8+) is the user's interpreter's, asked, not "unknown"."""
    shutil.copy(ROOT / "golden" / "RF004" / "deep_blocks_module" / "program.in.py", tmp_path / "program.py")
    diff = _tool(tool_venv, "apply", "program.py", "--diff", cwd=tmp_path, path_first=USER_BIN)
    assert "+    @torch.compiler.nested_compile_region" in diff.stdout, diff.stdout + diff.stderr
    assert "unknown torch version" not in diff.stderr and "this tool's own torch" not in diff.stderr
    (cached,) = json.loads((tmp_path / ".recompile-fix/cache/torch-versions.json").read_text()).values()
    assert cached["torch"] == metadata.version("torch")
