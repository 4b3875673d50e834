"""A fork server for the language-server tests: one process that has imported what every
`python -m recompile_fix lsp` loads (the command line, pygls and lsprotocol, the engine and the
rules; libcst and black, which a server loads in the background once initialized), and forks a
server for each test session. A session then pays for its test, not for those imports: about
0.5 s of CPU of a bare session's 0.65 s, and the libcst and black a fix needs.

    python tests/lsp_forkserver.py serve SOCKET      # the server (``command`` starts it)
    python tests/lsp_forkserver.py launch SOCKET ARGS  # what a test runs in place of
                                                        # `python -m recompile_fix ARGS`

The launcher passes its stdin, stdout and stderr (the test client's pipes), environment and
working directory over the socket, lets go of its own copies of the pipes (so the client sees
the server's end of them alone), and exits with the forked server's exit code. The forked child
takes them over and runs ``recompile_fix`` as ``python -m`` runs it. The tests about a fresh
process's start-up (the answer before pygls loads, the first open) spawn it as an editor does:
``session(..., fresh=True)`` in tests/test_lsp.py. The server forks only while it has one
thread, and exits when its socket file is removed (the pytest process that started it removes
it at exit) or after ``IDLE`` seconds without a request.
"""

import json
import os
import signal
import socket
import sys
import time

from recompile_fix._bootstrap.zygote import _receive, reap  # the warm runner's wire: JSON lines, fds

IDLE = 600.0


def _preload() -> None:
    import lsprotocol.types  # noqa: F401
    import pygls.io_  # noqa: F401
    import pygls.lsp.server  # noqa: F401

    import recompile_fix.cli  # noqa: F401
    import recompile_fix.cli.lsp  # noqa: F401
    import recompile_fix.lsp.first_analysis  # noqa: F401
    from recompile_fix.lsp import server

    # What every server loads in the background once initialized (libcst, the rules, black).
    server._warm_engine()
    server._warm_formatter()


def _child(request: dict, fds: list[int]) -> None:
    """Become `python -m recompile_fix ARGS` on the launcher's stdio; never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        import runpy

        sys.argv = ["recompile_fix", *request["args"]]
        runpy.run_module("recompile_fix", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)  # as the interpreter prints sys.exit("message")
    except BaseException:  # noqa: BLE001 - reported as the interpreter would, exit 1
        import traceback

        traceback.print_exc()
    finally:
        # As the interpreter ends a program, less the teardown of every module.
        import atexit
        import threading

        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed pipe: nothing to flush into
                pass
        os._exit(code)


def serve(path: str) -> None:
    _preload()
    import select
    import threading

    if threading.active_count() > 1:
        sys.exit("lsp fork server: a preloaded module started a thread; not forking")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    # A child's end wakes the loop (SIGCHLD through a wakeup socket): one thread, no polling.
    wake_read, wake_write = socket.socketpair()
    wake_read.setblocking(False)
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{path}.tmp")
    listener.listen(16)
    os.rename(f"{path}.tmp", path)  # there once it accepts
    waiting: dict[int, socket.socket] = {}  # child pid -> its launcher's connection
    last = time.monotonic()
    while os.path.exists(path) and (waiting or time.monotonic() - last < IDLE):
        ready, _, _ = select.select([listener, wake_read], [], [], 1.0)
        if wake_read in ready:
            try:
                while wake_read.recv(512):
                    pass
            except BlockingIOError:
                pass
        reap(waiting)
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            for other in (listener, wake_read, wake_write, *waiting.values()):
                other.close()
            conn.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        waiting[pid] = conn


def launch(path: str, args: list[str]) -> int:
    """Run `python -m recompile_fix ARGS` in a child of the server on this process's stdio."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = {"args": args, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    # Let go of the pipes: the client must see end-of-file when the server closes them.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            return 1  # the server went away
        data += chunk
    code = json.loads(data)["exit"]
    return 128 - code if code < 0 else code


_STARTED: list = []  # this pytest process's server: (socket path, process)


def command(args: list[str]) -> list[str]:
    """The command that runs `python -m recompile_fix ARGS` forked from this pytest process's
    server (started on first use, stopped at exit)."""
    if not _STARTED:
        import atexit
        import subprocess
        import tempfile

        folder = tempfile.mkdtemp(prefix="rf-lsp-fork-")
        path = os.path.join(folder, "socket")
        process = subprocess.Popen([sys.executable, __file__, "serve", path], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the lsp fork server did not start (exit {process.returncode})")
            time.sleep(0.01)

        def stop() -> None:
            try:
                os.unlink(path)
            except OSError:
                pass
            process.terminate()
            process.wait(10)
            os.rmdir(folder)

        atexit.register(stop)
        _STARTED.append(path)
    return [sys.executable, __file__, "launch", _STARTED[0], *args]


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(launch(sys.argv[2], sys.argv[3:]))
