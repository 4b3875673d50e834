"""The warm runner (recompile_fix/profile/warm.py, _bootstrap/zygote.py): a run it gives is the
run a fresh interpreter gives (the same Profile, output, exit code, argv, paths, tracebacks),
and it is the server's child, not a process of its own."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from recompile_fix.profile import warm

PROGRAM = """\
import os, random, sys
import torch

def f(x):
    return x * 2 + 1

g = torch.compile(f, backend="eager")
for n in (3, 4, 5):
    g(torch.ones(n))
print("ppid", os.getppid(), "argv", sys.argv, "name", __name__, "path0", sys.path[0], "cwd", os.getcwd(), "file", __file__, f.__code__.co_filename, "draws", torch.rand(2).tolist(), random.random())
print("stdin", sys.stdin.readline().strip() if not sys.stdin.isatty() else "")
print("err line", file=sys.stderr)
if "--fail" in sys.argv:
    raise ValueError("as asked")
sys.exit(int(sys.argv[-1][len("--exit="):]) if sys.argv[-1].startswith("--exit=") else 0)
"""

_TIMINGS = {"pid", "seconds", "cpu_seconds", "wall_seconds", "started", "steady"}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _TIMINGS}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


def _server_pids(directory: Path) -> set[int]:
    return {int(p.read_text()) for p in directory.glob("*.pid")}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "sub").mkdir()
    return tmp_path


def _profile(project: Path, warm_dir: str | None, *args: str, env: dict | None = None, python: str = "python"):
    env = {**(env or {}), **({warm.WARM_DIR_ENV: warm_dir} if warm_dir else {warm.OFF_ENV: "0"})}
    done = run_cli("profile", "--backend", "eager", "--", python, "prog.py", *args, cwd=project, env=env)
    profile = json.loads((project / ".recompile-fix" / "profile.json").read_text())
    return done, profile


@pytest.mark.slow
def test_a_warm_run_is_the_cold_run(project, tmp_path_factory):
    # The interpreter named from the project (`.venv/bin/python`, as the README says), and a
    # warm directory that does not exist yet.
    os.symlink(sys.prefix, project / ".venv", target_is_directory=True)
    python = str(Path(".venv", "bin", Path(sys.executable).name))
    warm_dir = str(tmp_path_factory.mktemp("warm") / "new")
    cold, cold_profile = _profile(project, None, "a", "b", python=python)
    first, _ = _profile(project, warm_dir, "a", "b", python=python)  # starts the server
    again, warm_profile = _profile(project, warm_dir, "a", "b", python=python)
    servers = _server_pids(Path(warm_dir))
    try:
        assert len(servers) == 1
        assert _stable(warm_profile) == _stable(cold_profile)
        assert warm_profile["frames"] and cold_profile["frames"]
        for done in (first, again):
            assert done.returncode == cold.returncode == 0, done.stderr
            line = next(x for x in done.stdout.splitlines() if x.startswith("ppid"))
            assert int(line.split()[1]) in servers  # the server's child, not a process of our own
            cold_line = next(x for x in cold.stdout.splitlines() if x.startswith("ppid"))
            # argv, __name__, sys.path[0], cwd, and the random numbers an unseeded program draws
            # (every run the tool makes draws the same: `fix` and `verify` compare their outputs)
            assert line.split()[2:] == cold_line.split()[2:]
            assert "err line" in done.stderr
    finally:
        warm.stop_servers(Path(warm_dir))


@pytest.mark.slow
def test_exit_codes_tracebacks_and_other_variables(project, tmp_path_factory):
    warm_dir = str(tmp_path_factory.mktemp("warm"))
    try:
        failed, _ = _profile(project, warm_dir, "--fail")
        assert failed.returncode == 1
        traceback = failed.stderr[failed.stderr.index("Traceback") :]
        assert "ValueError: as asked" in traceback
        assert "zygote" not in traceback and "runpy" not in traceback  # as `python prog.py` prints it
        exited, _ = _profile(project, warm_dir, "--exit=3")
        assert exited.returncode == 3
        (first,) = _server_pids(Path(warm_dir))
        # A variable torch may read at import: another server, never the first one's import.
        _profile(project, warm_dir, env={"TORCH_LOGS": "-all"})
        assert len(_server_pids(Path(warm_dir)) - {first}) == 1
        # More servers than RECOMPILE_FIX_WARM_MAX: the least used one ends.
        _profile(project, warm_dir, env={"TORCH_LOGS": "-dynamo", warm.MAX_ENV: "1"})
        assert first not in _server_pids(Path(warm_dir)) and len(_server_pids(Path(warm_dir))) == 1
        for _ in range(100):
            if not _alive(first):
                break
            time.sleep(0.1)
        assert not _alive(first)
    finally:
        warm.stop_servers(Path(warm_dir))


def test_only_plain_script_and_module_runs_are_warm():
    python = sys.executable
    assert warm.program_of([python, __file__, "x"]) == [__file__, "x"]
    assert warm.program_of([python, "-m", "pkg.mod", "x"]) == ["-m", "pkg.mod", "x"]
    assert warm.program_of([python, "-O", __file__]) is None  # interpreter options: cold
    assert warm.program_of([python, "-c", "pass"]) is None
    assert warm.program_of(["torchrun", "--nproc-per-node=2", __file__]) is None
    assert warm.program_of([python, "missing.py"]) is None
    # A script named from the run's directory (verify and fix run copies of the project).
    here = Path(__file__)
    assert warm.program_of([python, here.name, "x"], cwd=str(here.parent)) == [here.name, "x"]
    assert warm.program_of([python, here.name], cwd=str(here.parent.parent)) is None


def test_per_run_variables_do_not_pick_another_server():
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": "/boot:/user"}
    one = warm._server_env({**base, "RECOMPILE_FIX_PARTS_DIR": "/a", "PYTEST_CURRENT_TEST": "t1"}, "/boot")
    two = warm._server_env(
        {**base, "RECOMPILE_FIX_PARTS_DIR": "/b", "PYTEST_CURRENT_TEST": "t2", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"},
        "/boot",
    )
    assert one == two == {"PATH": base["PATH"], "PYTHONPATH": "/user"}
    assert warm._server_env({**base, "TORCH_LOGS": "+dynamo"}, "/boot") != one


SEEDED_FIRST = """\
import random
random.seed(7)
import numpy as np
np.random.seed(3)
import torch
print("draws", random.random(), np.random.rand())
"""


@pytest.mark.slow
def test_a_program_that_seeds_before_importing_torch_draws_its_own_numbers(tmp_path, tmp_path_factory):
    """The tool seeds the generators an unseeded program would draw afresh (test above); one the
    program seeded before `import torch` keeps the program's seed, cold or warm."""
    import subprocess

    (tmp_path / "prog.py").write_text(SEEDED_FIRST)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    warm_dir = str(tmp_path_factory.mktemp("warm"))
    try:
        for env in ({warm.OFF_ENV: "0"}, {warm.WARM_DIR_ENV: warm_dir}, {warm.WARM_DIR_ENV: warm_dir}):
            done = run_cli("profile", "--", "python", "prog.py", cwd=tmp_path, env=env)
            assert done.returncode == 0, done.stderr
            line = next(x for x in done.stdout.splitlines() if x.startswith("draws"))
            assert line == plain.stdout.strip()
    finally:
        warm.stop_servers(Path(warm_dir))


EXIT_PROGRAM = """\
import atexit, os, sys, tempfile, threading, time, weakref
import torch

class Thing:
    pass

thing = Thing()
dead = weakref.proxy(thing)  # any look at it raises, once the object is gone
del thing

left = open("left_open.txt", "w")
left.write("written, never closed\\n")
temporary = tempfile.NamedTemporaryFile(dir=".", prefix="deleted-at-exit-")
open("temporary_name.txt", "w").write(temporary.name)

def later():
    time.sleep(0.3)
    open("thread_done.txt", "w").write("yes")

threading.Thread(target=later).start()  # not a daemon: the exit waits for it
atexit.register(lambda: print("atexit ran"))
os._exit = lambda code: print("a harness's own os._exit: the interpreter's exit never calls it")
print("buffered, never flushed")
code = sys.argv[1] if len(sys.argv) > 1 else None
sys.exit(int(code) if code and code.isdigit() else code)
"""


@pytest.mark.slow
@pytest.mark.parametrize("code", [None, "3", "a message"])
def test_a_warm_run_ends_as_the_cold_run(tmp_path, tmp_path_factory, code):
    """The child skips the interpreter's teardown of every module (0.2 s a run), and still ends
    as the interpreter ends a program: its status and `sys.exit` message, its threads joined,
    its atexit functions run, its open files flushed and closed, its temporary file deleted."""
    (tmp_path / "prog.py").write_text(EXIT_PROGRAM)
    argv = [sys.executable, "prog.py", *([code] if code else [])]
    warm_dir = tmp_path_factory.mktemp("warm")
    ended = {}
    try:
        for how in ("cold", "warm", "warm again"):
            for name in ("left_open.txt", "thread_done.txt"):
                (tmp_path / name).unlink(missing_ok=True)
            env = {**os.environ, warm.WARM_DIR_ENV: str(warm_dir)}
            if how == "cold":
                import subprocess

                cold = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
                done = (cold.returncode, cold.stdout, cold.stderr)
            else:
                done = warm.run_captured(argv, env=env, cwd=str(tmp_path))
                assert done is not None
            temporary = Path((tmp_path / "temporary_name.txt").read_text())
            ended[how] = (
                *done,
                (tmp_path / "left_open.txt").read_text(),
                (tmp_path / "thread_done.txt").exists(),
                temporary.exists(),
            )
    finally:
        warm.stop_servers(warm_dir)
    assert ended["warm"] == ended["warm again"] == ended["cold"]
    status = {None: 0, "3": 3, "a message": 1}[code]
    assert ended["cold"] == (
        status,
        "buffered, never flushed\natexit ran\n",
        "a message\n" if code == "a message" else "",
        "written, never closed\n",
        True,
        False,
    )


DYNAMO_STATE_PROGRAM = """\
import json, warnings
import torch
import torch._dynamo
from torch._dynamo import utils
from torch._subclasses.fake_tensor import FakeTensorMode

heard = []  # a harness's hook on torch's metrics (tests/programs/torch_metrics.py sets one so)
record = utils.record_compilation_metrics
utils.record_compilation_metrics = lambda *args, **kwargs: heard.append(1) or record(*args, **kwargs)

def f(x, n: int):
    return (x * n).softmax(-1) + x.mean()

g = torch.compile(f, backend="eager")
for size in (2, 3, 4):
    g(torch.ones(size, 4), size)
warnings.warn("shown once, as in a fresh process")
print(json.dumps({
    "counters": {kind: dict(counts) for kind, counts in utils.counters.items()},
    "compile_ids": [str(m.compile_id) for m in utils.get_compilation_metrics()],
    "heard": len(heard),
    "next_name": torch._dynamo.bytecode_transformation.unique_id("__compiled_fn"),
    "next_graph": next(torch._dynamo.output_graph._compile_id_counter),
    "fake_tensor_cache": [FakeTensorMode.cache_hits, FakeTensorMode.cache_misses],
    "op_count": utils.op_count,
    "threads": torch.get_num_threads(),
}, sort_keys=True))
"""


@pytest.mark.slow
def test_a_warm_run_starts_from_dynamos_state_in_a_fresh_process(tmp_path, tmp_path_factory):
    """The server compiles a model once before it serves (_bootstrap/first_compile.py: what
    Dynamo builds on a process's first trace, built once): a program still sees the compile ids,
    counters, metrics (through a hook set before its first compile), generated names, thread
    count and warnings of a fresh process."""
    import subprocess

    (tmp_path / "prog.py").write_text(DYNAMO_STATE_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # the warning shows
    env[warm.WARM_DIR_ENV] = str(tmp_path_factory.mktemp("warm"))
    argv = [sys.executable, "prog.py"]
    try:
        cold = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        runs = [(cold.returncode, cold.stdout, cold.stderr)]
        runs += [warm.run_captured(argv, env=env, cwd=str(tmp_path)) for _ in range(2)]
    finally:
        warm.stop_servers(Path(env[warm.WARM_DIR_ENV]))
    assert runs[0][0] == 0, runs[0][2]
    assert "UserWarning: shown once" in runs[0][2]
    state = json.loads(runs[0][1])
    assert state["compile_ids"][0] == "0/0" and state["heard"] == 2 and state["next_name"].startswith("__compiled_fn_")
    assert runs[1] == runs[2] == runs[0]
