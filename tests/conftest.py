"""Shared test helpers, and the two lanes: ``pytest -m "not slow and not fuzz"`` (no torch program
runs, no fuzz budget) and the whole suite.

A test is *slow* when it, or a fixture it uses, runs a program under torch (``profile``,
``verify``, an equivalence run, ``torch.compile`` in the test itself). Tests that use one of
``TORCH_FIXTURES`` are marked here; others carry ``@pytest.mark.slow``. ``run_cli`` and
``equivalence.run_recorded`` refuse to run a torch program for a test without the marker, so
the quick lane stays quick. A test that runs no torch but takes seconds on its own (a browser,
an editor, a language server waiting for a file to change, an input made to be large) is marked
slow too, with the reason beside the mark: the quick lane is for the loop of an edit, CI runs
everything.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from recompile_fix.lsp.first_open import CACHE_DIR_ENV
from recompile_fix.profile.warm import MAX_ENV, OFF_ENV, PRELOAD_ENV, WARM_DIR_ENV, stop_servers

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"
# The recompilation guide's examples (../shared/seeds) as scripts: tests/programs/seeds/, but for
# those that are also a golden case's input, kept once, there.
_SEEDS_IN_GOLDEN = {"shape_change.py": "RF001/seed_shape_change", "lr_scheduler.py": "RF003/seed_lr_scheduler"}


def seed(name: str) -> Path:
    if name in _SEEDS_IN_GOLDEN:
        return ROOT / "golden" / _SEEDS_IN_GOLDEN[name] / "program.in.py"
    return PROGRAMS / "seeds" / name


# main.py, helpers.py and profile.json: the Profile the tool recorded on them
# (`pytest --update-golden` records it again).
TWO_FILES = PROGRAMS / "two_files"
MAIN = (TWO_FILES / "main.py").read_text()
HELPERS = (TWO_FILES / "helpers.py").read_text()

# Fixtures that run a torch program: every test that uses one (directly or through another
# fixture) is slow.
TORCH_FIXTURES = {
    "ddp_run",  # test_distributed
    "fixed_examples",  # test_examples
    "unicode_recorded",  # test_lsp
    "findings",  # test_rf001
    "rewritten",  # test_rf005
    "traced_examples",  # test_trace_reader
    "verified_examples",  # test_verify
    "planted",  # test_verify
}

_CURRENT: list = []  # the test being run (its setup included)


def pytest_collection_modifyitems(items):
    for item in items:
        if TORCH_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _CURRENT.append(item)
    try:
        yield
    finally:
        _CURRENT.pop()
        # torch's inductor writes its default cache folder into os.environ the first time a test
        # compiles with it in this process: every later run's environment would differ from the
        # earlier ones' and start servers of its own (seven did, for one worker's second half).
        if _INDUCTOR_CACHE_ENV not in _ENV_AT_START:
            os.environ.pop(_INDUCTOR_CACHE_ENV, None)


def require_slow(what: str) -> None:
    """Called before a torch program runs: the test running it must be marked slow."""
    if not _CURRENT:
        return
    item = _CURRENT[-1]
    if item.get_closest_marker("slow") is None and not item.config.getoption("--update-golden"):
        raise AssertionError(
            f"{item.nodeid} runs a torch program ({what}) but is not marked slow: add "
            "@pytest.mark.slow, or its fixture to TORCH_FIXTURES in tests/conftest.py"
        )


def _runs_torch(args) -> bool:
    if not args:
        return False
    if args[0] == "profile":  # a command that exists (no command, or a missing one, runs nothing)
        command = [str(a) for a in args[args.index("--") + 1 :]] if "--" in args else []
        if "--from-trace" in args or not command:
            return False
        return command[0] == "python" or bool(shutil.which(command[0])) or os.path.exists(command[0])
    return args[0] in ("verify", "fix") or (args[0] == "apply" and "--verify" in args)


# What the warm runner's servers import besides torch for a program that imports a library first
# thing (recompile_fix/profile/warm.py): transformers' model code costs about 5 s of CPU a run.
_PRELOADS = {b"transformers": "transformers.modeling_utils", b"diffusers": "diffusers.models.modeling_utils"}


# What every program run of the suite is given, so that they share the warm runner's servers
# (a server is kept per environment; with and without it, the suite started twice as many):
# pytest_configure puts it in the session's environment, which every run starts from (the
# tool's processes, `run_python`, runs tests make in-process such as `fix_to_fixed_point`).
QUIET = {"PYTHONWARNINGS": "ignore"}
_INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
_ENV_AT_START = frozenset(os.environ)


def preload_env(*scripts) -> dict[str, str]:
    """The warm runner's preload for programs whose source is in ``scripts`` (paths)."""
    data = b"".join(Path(s).read_bytes() for s in scripts if Path(s).is_file())
    modules = [module for word, module in _PRELOADS.items() if word in data]
    return {PRELOAD_ENV: ",".join(modules)} if modules else {}


def _scripts(args, cwd) -> list[Path]:
    """The Python files a `profile`/`verify`/`fix` command line runs (``python X.py``), or none."""
    if "--" not in args:
        return []
    command = [str(a) for a in args[args.index("--") + 1 :]]
    base = Path(cwd or ROOT)
    return [base / c for c in command if c.endswith(".py")]


# Commands that read the environment only while they run: `run_cli` runs them in this process
# (click's runner), where a fresh process would cost 0.3-0.5 s of interpreter start and imports
# (500 of them were a tenth of the suite's CPU; `profile`'s plan of what it recorded, 158 runs a
# suite, another 70 s of CPU, most of it importing libcst again; `verify` and `fix`, 21, 13 s).
# Those three run their programs as they always do, in processes of their own (the warm
# runner's), writing to this process's file descriptors: `run_cli_here` collects them. A test
# about the tool's process itself (its imports, its start, variables read at import, signals)
# passes ``fresh=True``, or ``env``.
IN_PROCESS = frozenset({"apply", "report", "rules", "profile", "verify", "fix"})


def run_cli(*args, cwd=None, check=None, env=None, fresh=False):
    """Run `recompile-fix ARGS` as a user would: a command of ``IN_PROCESS`` in this one (its
    program, if it runs one, in a process of its own), else, or with ``env`` (more variables) or
    ``fresh``, in a fresh process."""
    if _runs_torch(args):
        require_slow("recompile-fix " + " ".join(map(str, args[:1])))
    if not fresh and env is None and args and str(args[0]) in IN_PROCESS:
        return run_cli_here(*args, cwd=cwd or ROOT, check=check)
    completed = subprocess.run(
        [sys.executable, "-m", "recompile_fix", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **preload_env(*_scripts(args, cwd)), **(env or {})},
    )
    if check is not None:
        assert completed.returncode == check, completed.stdout + completed.stderr
    return completed


@pytest.fixture
def cli():
    return run_cli


def examples_run() -> Path:
    """The session's one `recompile-fix profile --backend eager -- python examples/run_all.py`
    (run_all imports only its own examples), with ``TORCH_TRACE`` on: a folder holding
    ``examples/``, the ``.recompile-fix/`` it recorded and ``trace/``. Recorded once a session
    for pytest-xdist's workers together, under a lock: the first to ask records it, the others
    wait for it (four test modules start from it; each recorded its own when two asked at once).
    Change nothing in it: a test that edits copies it (``profiled_examples``). Commands run from
    it (test_trace_reader's `report`) may add to the tool's cache there, which is written aside
    and renamed."""
    import fcntl
    import hashlib

    require_slow("recompile-fix profile of examples/run_all.py")
    examples = ROOT / "examples"
    digest = hashlib.sha256()
    for path in sorted(p for p in examples.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(examples)).encode() + b"\0" + path.read_bytes())
    runs = Path(os.environ.get("RECOMPILE_FIX_TEST_RUNS") or tempfile.gettempdir())
    run = runs / f"examples-{digest.hexdigest()[:16]}"
    with open(f"{run}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (run / "recorded").is_file():
            shutil.rmtree(run, ignore_errors=True)
            shutil.copytree(examples, run / "examples", ignore=shutil.ignore_patterns("__pycache__"))
            trace = {"TORCH_TRACE": str(run / "trace")}
            run_cli("profile", "--backend", "eager", "--", "python", "examples/run_all.py", cwd=run, env=trace, check=0)
            (run / "recorded").touch()
    return run


def profiled_examples(dest: Path, ignore: tuple[str, ...] = ()) -> Path:
    """``dest`` holding a copy of examples/ (``ignore``: names left out) and of the
    `.recompile-fix/` the session's ``examples_run`` recorded."""
    run = examples_run()
    shutil.copytree(ROOT / "examples", dest / "examples", ignore=shutil.ignore_patterns("__pycache__", *ignore))
    # (a cache file being replaced there is written aside and renamed: never copy one half-made)
    shutil.copytree(run / ".recompile-fix", dest / ".recompile-fix", ignore=shutil.ignore_patterns("*.tmp"))
    return dest


def run_cli_here(*args, cwd, check=None):
    """`recompile-fix ARGS` in this process (click's runner, from ``cwd``): where the test is what
    a command writes, a process start and the imports (0.3 s) would be most of its time. Exit
    code, stdout and stderr as ``run_cli`` gives them: a program `profile` runs writes to this
    process's descriptors 1 and 2, collected here, its output before the tool's closing lines."""
    import warnings
    from unittest import mock

    from click.testing import CliRunner

    from recompile_fix.cli import main

    assert str(args[0]) in IN_PROCESS, f"`{args[0]}` runs in a process of its own: use run_cli"
    before = os.getcwd()
    os.chdir(cwd)
    try:
        # As `run_cli`'s process: warnings off (PYTHONWARNINGS=ignore there), and a scan in one
        # process (its default pool forks, and forking a pytest-xdist worker, which has threads,
        # can hang; --jobs N, or a fresh process, tests the pool).
        with warnings.catch_warnings(), mock.patch("os.cpu_count", return_value=1), _program_output() as program:
            warnings.simplefilter("ignore")
            env = preload_env(*_scripts(args, cwd))  # as `run_cli` gives a process of its own
            result = CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)
    finally:
        os.chdir(before)
    out, err = program
    completed = subprocess.CompletedProcess(args, result.exit_code, out + result.stdout, err + result.stderr)
    if check is not None:
        assert completed.returncode == check, completed.stdout + completed.stderr
    return completed


@contextlib.contextmanager
def _program_output():
    """Descriptors 1 and 2 sent to files while it is open (a program run from this process
    writes there, not into pytest's capture); yields a list that holds what each got, once
    closed."""
    written: list[str] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            yield written
        finally:
            for fd, kept in zip((1, 2), saved):
                os.dup2(kept, fd)
                os.close(kept)
            for file in (out, err):
                file.seek(0)
                written.append(file.read().decode("utf-8", "replace"))


def run_python(*args, cwd=None, env=None, timeout=None) -> subprocess.CompletedProcess:
    """``python ARGS`` as ``subprocess.run(capture_output=True, text=True)`` runs it, in the
    session's warm runner where it can be run exactly that way (torch already imported: about
    3 s of CPU less a run), else cold. ``env``: the whole environment (default: ours)."""
    from recompile_fix.profile import warm

    require_slow("python " + " ".join(map(str, args[:1])))
    argv = [sys.executable, *map(str, args)]
    env = {**os.environ} if env is None else {**env}
    done = warm.run_captured(argv, env={**env, **preload_env(*argv[1:2])}, cwd=str(cwd or ROOT))
    if done is None:
        return subprocess.run(argv, cwd=cwd or ROOT, capture_output=True, text=True, env=env, timeout=timeout)
    return subprocess.CompletedProcess(argv, *done)


def pytest_configure(config):
    os.environ.update(QUIET)  # before pytest-xdist starts its workers: theirs too
    # The suite starts about 2,000 Python processes (the tool, programs, servers); with
    # PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) each would compile the tool's
    # modules from source again. Its own processes write and reuse the bytecode caches.
    if not hasattr(config, "workerinput"):
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.dont_write_bytecode = False
    # `python` in a profiled command is the first `python` on PATH (the user's environment, as a
    # shell finds it): the tests' programs run in the test environment, as if it were activated.
    bin_dir = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join(p for p in (bin_dir, os.environ.get("PATH", "")) if p)
    # One directory of recorded runs for the session, shared by pytest-xdist's workers (they
    # inherit the environment of the process that starts them).
    if not hasattr(config, "workerinput") and "RECOMPILE_FIX_TEST_RUNS" not in os.environ:
        config.recorded_runs_dir = tempfile.mkdtemp(prefix="recompile-fix-test-runs-")
        os.environ["RECOMPILE_FIX_TEST_RUNS"] = config.recorded_runs_dir
    # One warm runner for the session (recompile_fix/profile/warm.py): a program run pays for the
    # program, not for `import torch` (about 5 s of CPU each). RECOMPILE_FIX_WARM=0 runs cold.
    if not hasattr(config, "workerinput") and WARM_DIR_ENV not in os.environ and os.environ.get(OFF_ENV) != "0":
        config.warm_dir = tempfile.mkdtemp(prefix="rfw-", dir="/tmp" if os.path.isdir("/tmp") else None)
        os.environ[WARM_DIR_ENV] = config.warm_dir
        # The suite's runs want 3-4 servers at a time (no library, transformers or diffusers
        # preloaded; QUIET in every environment), and a few tests one of their own (a project's
        # venv, PYTHONPATH set); with the default 4, servers were retired and started again 13
        # times in 4 minutes (about 4 s of CPU each). About 0.35 GB each.
        os.environ.setdefault(MAX_ENV, "10")
    # The language servers' kept diagnostics (lsp/first_open) in a folder of the session's, not
    # the user's cache.
    if not hasattr(config, "workerinput") and CACHE_DIR_ENV not in os.environ:
        config.cache_dir = tempfile.mkdtemp(prefix="recompile-fix-cache-")
        os.environ[CACHE_DIR_ENV] = config.cache_dir


def pytest_unconfigure(config):
    directory = getattr(config, "recorded_runs_dir", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        os.environ.pop("RECOMPILE_FIX_TEST_RUNS", None)
    warm_dir = getattr(config, "warm_dir", None)
    if warm_dir is not None:
        stop_servers(Path(warm_dir))
        shutil.rmtree(warm_dir, ignore_errors=True)
        os.environ.pop(WARM_DIR_ENV, None)
    cache_dir = getattr(config, "cache_dir", None)
    if cache_dir is not None:
        shutil.rmtree(cache_dir, ignore_errors=True)
        os.environ.pop(CACHE_DIR_ENV, None)


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Re-record golden Profiles and rewrite expected outputs (review the diff!).",
    )


@pytest.fixture(scope="session")
def recorded_project(tmp_path_factory, request):
    """A two-file project and the Profile the tool recorded on it (copy it before changing it)."""
    project = tmp_path_factory.mktemp("project")
    shutil.copy(TWO_FILES / "main.py", project / "main.py")
    shutil.copy(TWO_FILES / "helpers.py", project / "helpers.py")
    if request.config.getoption("--update-golden"):
        run_cli("profile", "--backend", "eager", "--", "python", "main.py", cwd=project, check=0)
        shutil.copy(project / ".recompile-fix" / "profile.json", TWO_FILES / "profile.json")
    else:
        (project / ".recompile-fix").mkdir()
        shutil.copy(TWO_FILES / "profile.json", project / ".recompile-fix" / "profile.json")
    return project


@pytest.fixture
def project(recorded_project, tmp_path):
    work = tmp_path / "proj"
    shutil.copytree(recorded_project, work)
    return work
