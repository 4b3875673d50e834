"""The warm runner's server: one process of the user's interpreter that has imported torch, and
forks a child for each program run (``recompile_fix.profile.warm`` is the client).

It runs inside the user's interpreter, so it imports only the standard library (and torch). A
run that asks for it gets a child that looks like ``python script.py ARGS`` started afresh: its
own process group, the caller's stdin/stdout/stderr (passed over the socket), the caller's
environment, working directory, argv and ``sys.path[0]``, fresh stdio objects, the random
seeds every run the tool makes gets (``profile.run_seed``), default signal handlers, and the recorder installed as ``sitecustomize`` would install it
(torch is imported already: ``install_when_torch_imported`` installs at once). What it saves is
what every run would pay before the program's first line: ``import torch`` and
``torch._dynamo`` (about 5 s of CPU on a 2-core machine); on its first compile: what Dynamo
builds on a process's first trace (``first_compile.py``, undone before the fork); and after its
last: the teardown of every module, which in a forked child copies each page the server's
objects sit on (``_end`` ends the child as the interpreter ends a program, without it).

The child is forked only from a process with one Python thread (forking one with more can leave
a lock held in the child); a server that finds more refuses to start, and the client runs the
program the ordinary way. The server exits when its socket file is removed, or after
``--idle`` seconds without a request.

Protocol (one connection per run): the client sends one JSON line ``{"argv": [...], "env":
{...}, "cwd": ...}`` with three file descriptors (SCM_RIGHTS); the server answers ``{"pid": N}``
once forked and ``{"exit": CODE}`` when the child ends (CODE as ``subprocess`` gives it: negative
for a signal).
"""

import json
import os
import select
import signal
import socket
import sys
import time

_READY = "ready"
_KEPT: list = []
# The process's own exit, as it is before a program can replace os._exit (a harness that reports
# from it): the interpreter's exit calls no os._exit, and neither does the child's ``_end``.
_EXIT = os._exit


def _threads() -> int:
    """Python threads besides this one. Native pools (numpy's OpenBLAS starts one at import) are
    not counted: they shut down and restart around a fork (pthread_atfork), as for the forked
    workers of torch's DataLoader."""
    import threading

    return threading.active_count()


_FIRST_TRACE_IMPORTS = (
    "torch._dynamo.dce_extra_outputs",
    "torch._export.db.logging",
    "torch._export.passes.add_runtime_assertions_for_constraints_pass",
    "torch._export.passes.collect_tracepoints_pass",
    "torch._higher_order_ops.passes.inline_invoke_subgraph",
    "torch._inductor.compiler_bisector",
    "torch._inductor.sizevars",
    "torch._subclasses.schema_check_mode",
    "torch.distributed.tensor.experimental",
    "torch.export._leakage_detection_utils",
    "torch.export._trace",
    "torch.export._unlift",
    "torch.fx.experimental.validator",
    "torch.nn.attention.flex_attention",
)


def _preload() -> None:
    import importlib

    import torch
    import torch._dynamo

    # What a program's first torch.compile imports before it traces: the backend registry imports
    # every backend module (aot_autograd, FSDP's, ...) on its first lookup, about 0.2-0.4 s of
    # each run's CPU, paid here once. Imports only: no compile, no Dynamo state in the children.
    try:
        torch._dynamo.list_backends(exclude_tags=())
    except Exception:  # noqa: BLE001 - a torch without it: the program pays, as it would cold
        pass

    # What Dynamo imports during a program's first trace (torch 2.13 and 2.14: export's passes,
    # flex attention, the context-parallel ops it checks for): about 40 ms of each run's CPU.
    for name in _FIRST_TRACE_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - another torch: the program imports what it needs
            pass

    # RECOMPILE_FIX_WARM_PRELOAD: modules the programs of this server import anyway.
    for name in filter(None, os.environ.get("RECOMPILE_FIX_WARM_PRELOAD", "").split(",")):
        try:
            importlib.import_module(name.strip())
        except Exception:  # noqa: BLE001 - the program imports it itself, and fails there if it must
            pass


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, new_fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 8)
        fds.extend(new_fds)
        if not chunk:
            break
        data += chunk
    return json.loads(data.decode("utf-8")), fds


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall((json.dumps(message) + "\n").encode("utf-8"))
    except OSError:
        pass  # the client is gone: the child runs on, as a program whose shell closed would


def reap(waiting: dict) -> bool:
    """Answer each client whose child ended (``waiting``: pid -> its connection) with the child's
    exit code, as ``subprocess`` gives it; whether any ended."""
    ended = False
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        conn = waiting.pop(pid, None)
        if conn is not None:
            _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()
        ended = True
    return ended


def serve(path: str, idle: float) -> tuple[dict, list[int]] | None:
    """Accept runs until idle. Returns only in a forked child: its request and descriptors."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    identity = os.stat(path).st_ino
    print(_READY, flush=True)
    waiting: dict[int, socket.socket] = {}  # child pid -> its client's connection
    last = time.monotonic()
    while True:
        # A child's end is noticed by polling: often while children run (a run's result waits
        # on it), rarely while idle.
        readable, _, _ = select.select([server], [], [], 0.005 if waiting else 0.05)
        if reap(waiting):
            last = time.monotonic()
        if readable:
            conn, _ = server.accept()
            try:
                request, fds = _receive(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                for other in waiting.values():
                    other.close()
                return request, fds
            for fd in fds:
                os.close(fd)
            try:
                os.setpgid(pid, pid)  # also done in the child: whichever runs first
            except OSError:
                pass
            waiting[pid] = conn
            _send(conn, {"pid": pid})
            last = time.monotonic()
        elif not waiting:
            try:
                gone = os.stat(path).st_ino != identity
            except OSError:
                gone = True
            if gone or time.monotonic() - last > idle:
                server.close()
                return None


def _stdio(fd: int, mode: str, like):
    """A text stream on ``fd`` made as the interpreter makes sys.stdin/stdout/stderr at startup."""
    import io

    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    raw = io.FileIO(fd, mode, closefd=False)
    interactive = raw.isatty()
    buffer: io.RawIOBase | io.BufferedIOBase
    if mode == "rb":
        buffer = io.BufferedReader(raw)
    elif unbuffered:
        buffer = raw
    else:
        buffer = io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffer,  # a raw FileIO when unbuffered, as the interpreter makes it
        encoding=like.encoding,
        errors=like.errors,
        newline="\n",
        line_buffering=not unbuffered and mode != "rb" and (interactive or fd == 2),
        write_through=unbuffered,
    )


def _become(request: dict, fds: list[int]) -> list[str]:
    """Turn this forked child into the process ``python ARGV`` would have started."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGTTOU, signal.SIGTTIN):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # The interpreter's own stdio objects own fds 0-2: kept alive, so that collecting them never
    # closes the program's descriptors (at exit, the new ones are flushed first).
    _KEPT.extend((sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__))
    for name, fd, mode in (("stdin", 0, "rb"), ("stdout", 1, "wb"), ("stderr", 2, "wb")):
        stream = _stdio(fd, mode, getattr(sys, name))
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    import random

    random.seed()  # a fresh process draws a fresh seed
    argv = list(request["argv"])
    sys.orig_argv = [sys.executable, *argv]
    sys.argv = argv[1:] if argv[0] == "-m" else argv
    return argv


def _run(argv: list[str], recorder: bool) -> None:
    import runpy

    try:
        from recompile_fix._bootstrap.watchdog import watch

        watch()  # the program ends when the recompile-fix that runs it is killed
    except Exception as exc:  # noqa: BLE001 - the program must run regardless
        print(f"recompile-fix: watchdog not started: {exc!r}", file=sys.stderr)
    if recorder:
        try:
            from recompile_fix.profile.recorder.install import install_when_torch_imported

            install_when_torch_imported()
        except Exception as exc:  # the program must run even if the recorder cannot
            print(f"recompile-fix: recorder not started: {exc!r}", file=sys.stderr)
    if argv[0] == "-m":
        sys.path[0] = os.getcwd()
        runpy._run_module_as_main(argv[1])  # type: ignore[attr-defined]  # what `python -m` calls
    else:
        _run_script(argv[0])


def _run_script(path: str) -> None:
    """What ``python path`` does: a fresh ``__main__`` (``runpy.run_path`` would set sys.argv[0]
    to the absolute path, which the interpreter leaves as given), code compiled under the
    absolute path (as ``__file__``)."""
    import builtins
    import importlib.machinery
    import types

    script = os.path.abspath(path)
    sys.path[0] = os.path.dirname(script)
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    main.__spec__ = None
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    with open(script, "rb") as fh:
        source = fh.read()
    exec(compile(source, script, "exec"), main.__dict__)


def _report(exc: BaseException) -> None:
    """Print an uncaught exception as the interpreter would: without this file's and runpy's frames."""
    runpy = sys.modules["runpy"]
    ours = {os.path.abspath(__file__), os.path.abspath(runpy.__file__ or ""), "<frozen runpy>"}
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in ours or tb.tb_frame.f_code.co_filename == __file__):
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def main() -> None:
    path, idle = sys.argv[1], float(sys.argv[2])
    _preload()
    from recompile_fix._bootstrap.first_compile import compile_once

    if not compile_once():
        print("refused: a first compile's state could not be undone", flush=True)
        return
    if _threads() > 1:
        print(f"refused: {_threads()} threads after importing torch", flush=True)
        return
    # What the preload made is frozen before any fork: a child's collections, and the one its
    # interpreter's shutdown makes (about 0.8 s with torch loaded, longer than a small program's
    # run), skip it; the program's own objects are collected as in a cold run. (The recorder
    # freezes the rest at exit: profile/recorder/install.py.)
    import gc

    gc.collect()
    gc.freeze()
    child = serve(path, idle)
    if child is None:
        return
    recorder = bool(child[0].get("recorder", True))
    argv = _become(*child)
    del child
    try:
        _run(argv, recorder)
    except SystemExit as exc:
        _end(exc.code)
    except KeyboardInterrupt as exc:
        _report(exc)
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as the interpreter ends on an uncaught Ctrl-C
    except BaseException as exc:
        _report(exc)
        _end(1)
    _end(None)


def _end(code: str | int | None) -> None:
    """End the run as the interpreter ends a program (``sys.exit(code)``'s status and message;
    its non-daemon threads joined, then its atexit functions, its open files flushed and closed,
    a NamedTemporaryFile deleted), less the teardown of every module: in a child of the server,
    each object torch and the libraries made is written to as it is freed, a copy of each page
    it sits on (0.2 s of every run, however small the program). ``__del__`` of what is alive at
    exit is not called, which Python does not promise either."""
    import atexit
    import threading

    status = 0
    if isinstance(code, int):
        status = code
    elif code is not None:
        try:
            print(code, file=sys.stderr)
        except Exception:  # noqa: BLE001 - a message that cannot be printed still exits 1
            pass
        status = 1
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:  # another Python: the interpreter's own exit
        sys.exit(code)
    shutdown()
    atexit._run_exitfuncs()
    try:
        _close_files()
    except Exception:  # noqa: BLE001 - never an exit the program did not ask for
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream, as at a normal exit
            pass
    _EXIT(status & 0xFF)


def _close_files() -> None:
    """Close what the program left open, as the teardown would: temporary files first (closing
    one deletes it), then every other file object the run made, each before the one it writes
    into (the server's are frozen: not among these)."""
    import gc
    import io
    import tempfile

    # By type(), not isinstance(): a dead weakref.proxy among the objects raises on any look.
    made = [(o, type(o)) for o in gc.get_objects()]
    wrappers: list = [o for o, kind in made if issubclass(kind, tempfile._TemporaryFileWrapper)]
    standard = set()  # the standard streams and the layers under them: flushed after, not closed
    for stream in (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__):
        while stream is not None:
            standard.add(id(stream))
            stream = getattr(stream, "buffer", None) or getattr(stream, "raw", None)
    files = [o for o, kind in made if issubclass(kind, io.IOBase) and id(o) not in standard]
    del made
    # Text layers before their buffers before their raw files: each flushes into the next.
    layer = {io.TextIOBase: 0, io.BufferedIOBase: 1}
    files.sort(key=lambda f: next((n for kind, n in layer.items() if isinstance(f, kind)), 2))
    for handle in [*wrappers, *files]:
        try:
            handle.close()
        except Exception:  # noqa: BLE001 - as at teardown: a failing close does not stop the exit
            pass


if __name__ == "__main__":
    main()
