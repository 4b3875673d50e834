"""Ctrl-C and SIGTERM while `profile` or `verify` runs the user's program. They used to be lost:
SIGINT was set to ignored, and the program inherited that; SIGTERM killed recompile-fix and left
the program running (an orphan) and its temp directories behind, with no Profile or an empty one.

Now the signal reaches the program's whole process group (the program and what it started),
the program stops as it would on its own, the Profile of what it compiled is written, nothing is
left running and no temp directory is left; a second Ctrl-C aborts at once.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, ROOT

pytestmark = pytest.mark.slow  # every test here runs a torch program


@pytest.fixture(autouse=True)
def _cold(monkeypatch):
    """A single `profile` runs its program in a process of its own (no warm runner): that is the
    path tested here; tests/test_warm.py checks that a warm run is the same run."""
    monkeypatch.setenv("RECOMPILE_FIX_WARM", "0")


SLEEPER = PROGRAMS / "signals" / "sleeper.py"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False


def _start(tmp_path: Path, *args: str, mode: str = "plain"):
    work = tmp_path / "work"
    work.mkdir(parents=True)
    shutil.copy(SLEEPER, work / "sleeper.py")
    temp = tmp_path / "temp"  # recompile-fix's temp directories go here: all must be gone after
    temp.mkdir()
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "recompile_fix", *args, "--", "python", "sleeper.py", mode, str(ready)],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # as from a shell: its own group, so the test's signals are explicit
    )
    deadline = time.monotonic() + 240
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the program never got going"
        time.sleep(0.2)
    program, helper = map(int, ready.read_text().split())
    time.sleep(1.5)  # the helper past its start-up, sleeping
    return proc, work, temp, program, helper


_RECORDED: list[bytes] = []


def _with_profile(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp_path``'s work folder with sleeper.py and a Profile of it (f recompiled once),
    recorded by an interrupted `profile` once a session per worker; (work, temp)."""
    if not _RECORDED:
        proc, work, temp, program, helper = _start(tmp_path / "recording", "profile", "--backend", "eager")
        proc.send_signal(signal.SIGINT)
        _finish(proc, program, helper, temp)
        _RECORDED.append((work / ".recompile-fix" / "profile.json").read_bytes())
    work, temp = tmp_path / "work", tmp_path / "temp"
    (work / ".recompile-fix").mkdir(parents=True)
    temp.mkdir()
    shutil.copy(SLEEPER, work / "sleeper.py")
    (work / ".recompile-fix" / "profile.json").write_bytes(_RECORDED[0])
    return work, temp


def _finish(proc, program: int, helper: int, temp: Path) -> str:
    _, err = proc.communicate(timeout=120)
    deadline = time.monotonic() + 10
    while (_alive(program) or _alive(helper)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(program) and not _alive(helper), "a process was left running"
    # (torch keeps its own cache there: torchinductor_USER)
    ours = [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor")]
    assert ours == [], "a temp directory was left behind"
    # The program's own traceback (KeyboardInterrupt) is its business; none may come from ours.
    assert "recompile_fix/cli/" not in err and "recompile_fix/profile/run.py" not in err, err
    return err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_profile_passes_the_signal_on_and_writes_the_partial_profile(tmp_path, signum):
    proc, work, temp, program, helper = _start(tmp_path, "profile", "--backend", "eager")
    proc.send_signal(signum)
    err = _finish(proc, program, helper, temp)
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert f"recompile-fix: interrupted ({name}): wrote the partial Profile" in err, err
    profile = json.loads((work / ".recompile-fix" / "profile.json").read_text())
    (frame,) = profile["frames"]
    assert frame["name"] == "f" and len(frame["compiles"]) == 2
    assert [p.name for p in (work / ".recompile-fix").iterdir() if p.name.endswith(".tmp")] == []


def test_a_second_ctrl_c_aborts_at_once(tmp_path):
    proc, work, temp, program, helper = _start(tmp_path, "profile", "--backend", "eager", mode="stubborn")
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None and _alive(program)  # the program ignores the first one
    proc.send_signal(signal.SIGINT)
    err = _finish(proc, program, helper, temp)
    assert proc.returncode == 130
    assert "recompile-fix: interrupted (SIGINT); aborted: no Profile written" in err, err
    assert not (work / ".recompile-fix" / "profile.json").exists()


def test_verify_stops_on_sigterm_and_cleans_up(tmp_path):
    work, temp = _with_profile(tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "recompile_fix",
            "verify",
            "--",
            "python",
            "sleeper.py",
            "plain",
            str(tmp_path / "ready"),
        ],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not (tmp_path / "ready").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    program, helper = map(int, (tmp_path / "ready").read_text().split())
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    err = _finish(proc, program, helper, temp)
    assert proc.returncode == 143, err
    assert "recompile-fix: interrupted (SIGTERM)" in err, err


def test_ctrl_c_on_a_terminal_reaches_the_program(tmp_path):
    """On a terminal the program's group is the foreground group while it runs: Ctrl-C (the
    terminal's own SIGINT, here ^C typed into a pseudo-terminal) reaches it, and the terminal is
    ours again after."""
    import fcntl
    import termios

    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SLEEPER, work / "sleeper.py")
    ready = tmp_path / "ready"
    master, slave = os.openpty()

    def controlling_terminal():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-m", "recompile_fix", "profile", "--backend", "eager", "--"]
        + ["python", "sleeper.py", "plain", str(ready)],
        cwd=work,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        preexec_fn=controlling_terminal,
    )
    os.close(slave)
    output = bytearray()

    def drain(seconds: float) -> None:
        import select

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            readable, _, _ = select.select([master], [], [], 0.1)
            if readable:
                try:
                    output.extend(os.read(master, 65536))
                except OSError:
                    return

    deadline = time.monotonic() + 240
    while not ready.exists():
        assert proc.poll() is None, bytes(output)
        assert time.monotonic() < deadline
        drain(0.2)
    drain(1.5)
    program, helper = map(int, ready.read_text().split())
    os.write(master, b"\x03")  # Ctrl-C, as typed
    # By the clock, not by a count of drains: once the terminal's other end is gone, a drain
    # returns at once.
    until = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < until:
        drain(0.2)
        time.sleep(0.05)
    drain(0.5)
    os.close(master)
    assert proc.returncode == 130, bytes(output)
    assert b"wrote the partial Profile" in output, bytes(output)
    assert not _alive(program) and not _alive(helper)
    (frame,) = json.loads((work / ".recompile-fix" / "profile.json").read_text())["frames"]
    assert len(frame["compiles"]) == 2


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_kill_9_of_verify_ends_the_program_and_removes_its_copies(tmp_path, monkeypatch, warm):
    """kill -9 cannot be caught: the program used to run on (and its helper), with three copies
    of the tree left in the temp directory. Now the program watches its owner and ends its own
    group when it is gone, and a cleaner removes the owner's temp directories (a warm runner's
    too, which then ends)."""
    if warm:
        monkeypatch.setenv("RECOMPILE_FIX_WARM", "1")
        monkeypatch.delenv("RECOMPILE_FIX_WARM_DIR", raising=False)
    work, temp = _with_profile(tmp_path)
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "recompile_fix", "verify", "--", "python", "sleeper.py", "plain"]
        + [str(tmp_path / "ready")],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not (tmp_path / "ready").exists():
        assert proc.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.2)
    program, helper = map(int, (tmp_path / "ready").read_text().split())
    ours = [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor")]
    assert any(name.startswith("recompile-fix-verify-") for name in ours), ours  # the copies
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (
        _alive(program) or _alive(helper) or any(not p.name.startswith("torchinductor") for p in temp.iterdir())
    ):
        time.sleep(0.2)
    assert not _alive(program) and not _alive(helper), "the program outlived a kill -9 of verify"
    assert [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor")] == []
