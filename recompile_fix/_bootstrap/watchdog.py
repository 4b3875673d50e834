"""The program never outlives the recompile-fix that runs it (standard library only: it runs in
the user's processes).

`profile`, `verify` and `fix` run the program in a process group of its own and pass their pid
in ``RECOMPILE_FIX_OWNER``. A signal they catch reaches the group (``profile.run``); a kill -9
cannot be caught, so each process of the program watches its owner: a thread checks every
``POLL_S`` seconds that the owner still runs, and when it is gone kills the program's group
(this process included), first handing the owner's temp directories
(``RECOMPILE_FIX_OWNER_DIRS``: the copies of the tree, the recorder's files) to a detached
cleaner that removes them once the group is gone. (Not ``PR_SET_PDEATHSIG``: the kernel's kill
would end the program before it could hand them over.)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

OWNER_ENV = "RECOMPILE_FIX_OWNER"
OWNER_DIRS_ENV = "RECOMPILE_FIX_OWNER_DIRS"
POLL_S = 0.5

_started: list[int] = []  # the pid that started a watchdog (a forked child starts its own)


def alive(pid: int) -> bool:
    """Does ``pid`` run (a zombie, killed and not yet reaped, does not)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: it exists
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc: kill(0) said it exists


def watch() -> None:
    """Start watching the owner named in the environment (nothing when none is)."""
    try:
        owner = int(os.environ.get(OWNER_ENV, ""))
    except ValueError:
        return
    if owner <= 0 or owner == os.getpid() or os.getpid() in _started:
        return
    _started.append(os.getpid())
    try:
        owner_group = os.getpgid(owner)
    except OSError:
        owner_group = None
    if owner_group == os.getpgrp():
        return  # not a group of its own: killing it would kill the owner's; signals reach it
    dirs = [d for d in os.environ.get(OWNER_DIRS_ENV, "").split(os.pathsep) if d]
    threading.Thread(target=_poll, args=(owner, dirs), name="recompile-fix-watchdog", daemon=True).start()


def _poll(owner: int, dirs: list[str]) -> None:
    while alive(owner):
        time.sleep(POLL_S)
    group = os.getpgrp()
    if dirs:  # every process of the group that notices: whichever is first, the others are no-ops
        _clean_after(group, dirs)
    try:
        os.killpg(group, signal.SIGKILL)
    finally:
        os._exit(137)


_CLEANER = """
import os, shutil, sys, time
group, dirs = int(sys.argv[1]), sys.argv[2:]

def running():  # a process of the group that is not a zombie (killed, not yet reaped)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True
    for pid in pids:
        try:
            with open("/proc/%s/stat" % pid, "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != b"Z":
            return True
    return False

deadline = time.monotonic() + 30
while running() and time.monotonic() < deadline:
    time.sleep(0.1)
for d in dirs:
    shutil.rmtree(d, ignore_errors=True)
"""


def _clean_after(group: int, dirs: list[str]) -> None:
    """A process outside the group that removes ``dirs`` once the group is gone."""
    import subprocess

    try:
        subprocess.Popen(
            [sys.executable, "-S", "-c", _CLEANER, str(group), *dirs],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", "")},
        )
    except OSError:
        pass  # the next run's sweep removes them (profile.scratch)
