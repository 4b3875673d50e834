"""Compiles twice, starts a helper process, says so in a file, then sleeps: for the signal tests.
`stubborn` ignores Ctrl-C (only a second one, which aborts, or SIGKILL ends it)."""

import os
import subprocess
import sys
import time

import torch


@torch.compile(backend="eager")
def f(x):
    return x * 2


for n in (3, 4):
    f(torch.ones(n))
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
mode, ready = sys.argv[1], sys.argv[2]
with open(ready + ".tmp", "w") as fh:
    fh.write(f"{os.getpid()} {helper.pid}")
os.replace(ready + ".tmp", ready)
while True:
    try:
        time.sleep(300)
    except KeyboardInterrupt:
        if mode != "stubborn":
            raise
