"""Progress of the steps that run the user's program: the run and the seconds so far, with the
program's last output line, redrawn on a terminal; one closing line per run in which a crash reads
as a crash; nothing at all when stdout is not a terminal."""

import io
import os
import pty
import re
import subprocess
import sys
import time

import pytest

from recompile_fix.progress import PROGRESS_ENV, Progress, last_output_line


def test_last_output_line_of_a_log(tmp_path):
    log = tmp_path / "run.log"
    assert last_output_line(log) == ""  # not written yet
    log.write_bytes(b"epoch 1\nstep 10/100\r\x1b[32mstep 20/100\x1b[0m\r\n\n")
    assert last_output_line(log) == "step 20/100"  # a progress bar's last redraw, colours stripped
    log.write_bytes(b"x" * 10_000 + b"\nthe end\n")
    assert last_output_line(log) == "the end"


def _shown(text: str) -> list[str]:
    """What a terminal shows: each carriage-return redraw replaces the line."""
    return [re.sub(r"\x1b\[2K", "", line).split("\r")[-1] for line in text.split("\n")]


def test_a_run_is_redrawn_then_closed(tmp_path):
    log = tmp_path / "run.log"
    stream = io.StringIO()
    progress = Progress(stream=stream, enabled=True)
    with progress.run("round 2, run 3/4: a copy with 2 fixes", log) as shown:
        log.write_text("loss 0.25\n")
        time.sleep(1.2)
        shown.finish(0)
    text = stream.getvalue()
    assert "round 2, run 3/4: a copy with 2 fixes ... 1 s  | loss 0.25" in text  # while it ran
    assert _shown(text)[-2] == "round 2, run 3/4: a copy with 2 fixes: 1 s"


def test_a_crashed_run_is_shown_as_crashed(tmp_path):
    stream = io.StringIO()
    with Progress(stream=stream, enabled=True).run("run 2/2: a copy with 1 fix", tmp_path / "log") as shown:
        shown.finish(1, "ConstraintViolationError: Constraints violated")
    assert _shown(stream.getvalue())[-2] == (
        "run 2/2: a copy with 1 fix: CRASHED (exit code 1) after 0 s: ConstraintViolationError: Constraints violated"
    )


def test_quiet_when_not_a_terminal(tmp_path):
    stream = io.StringIO()
    progress = Progress(stream=stream)  # under pytest stdout is captured: not a terminal
    assert not progress.enabled
    with progress.run("run 1/2", tmp_path / "log") as shown:
        shown.finish(1)
    progress.say("round 1: 2 fix(es) to try")
    assert stream.getvalue() == ""


def test_on_a_terminal_by_itself():
    # A real pseudo-terminal, no override: progress shows; a pipe: it does not.
    script = (
        "from recompile_fix.progress import Progress\n"
        "p = Progress()\n"
        "with p.run('run 1/1: x', None) as s:\n"
        "    s.finish(0)\n"
        "print('enabled' if p.enabled else 'quiet')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != PROGRESS_ENV}
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout and stderr are the terminal
        os.execve(sys.executable, [sys.executable, "-c", script], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    assert b"run 1/1: x: 0 s" in out and b"enabled" in out
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert piped.stdout.strip() == "quiet" and piped.stderr == ""


@pytest.mark.slow
def test_the_programs_output_reaches_the_log_as_printed(tmp_path):
    """A piped child's stdout is block-buffered: without PYTHONUNBUFFERED the progress line shows
    torch's warnings, not the program's prints. A user's own setting is kept."""
    from recompile_fix.profile.run import run_profiled

    program = tmp_path / "p.py"
    program.write_text("import os, sys\nprint('unbuffered', os.environ.get('PYTHONUNBUFFERED'))\n")
    log = tmp_path / "run.log"
    for env, expected in (({}, "unbuffered 1"), ({"PYTHONUNBUFFERED": ""}, "unbuffered \n")):
        with open(log, "w") as out:
            run_profiled([sys.executable, str(program)], cwd=str(tmp_path), env=env, output=out)
        assert expected in log.read_text()


@pytest.mark.slow
def test_a_line_reaches_the_log_while_the_program_still_runs(tmp_path):
    """The progress line tails the run's log: a print must be there while the program runs on,
    not when it exits. The program prints, then waits (10 s at most) for the test to have read
    the line from the log; block-buffered, it would wait in vain and say so."""
    import threading
    import time

    from recompile_fix.profile.run import run_profiled

    seen = tmp_path / "seen"
    program = tmp_path / "p.py"
    program.write_text(
        "import os, time\nprint('step 1')\ndeadline = time.time() + 10\n"
        f"while not os.path.exists({str(seen)!r}) and time.time() < deadline:\n    time.sleep(0.05)\n"
        f"print('step 2' if os.path.exists({str(seen)!r}) else 'never read')\n"
    )
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        runner = threading.Thread(
            target=run_profiled, args=([sys.executable, str(program)],), kwargs={"cwd": str(tmp_path), "output": out}
        )
        runner.start()
        deadline = time.time() + 30
        while "step 1" not in log.read_text() and runner.is_alive() and time.time() < deadline:
            time.sleep(0.05)
        running = runner.is_alive()
        seen.write_text("")
        runner.join(60)
    assert running, log.read_text()  # the line was read while the program still ran
    assert log.read_text().splitlines()[-2:] == ["step 1", "step 2"]
