"""The raw record files a process leaves in ``RECOMPILE_FIX_PARTS_DIR``: ``part-<pid>.json`` at
exit (the whole record, JSON, never pickles), and ``part-<pid>.jsonl`` as it goes (each compile
and graph break as recorded), which that file replaces. ``run._read_parts`` reads them back."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import IO

from recompile_fix.profile.libraries import interpreter_record  # standard library only

__all__ = ["PARTS_DIR_ENV", "PartFile", "process_header", "program_import_paths", "write_record"]

PARTS_DIR_ENV = "RECOMPILE_FIX_PARTS_DIR"


def _int_env(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else None


def process_header(torch_version: str | None) -> dict:
    """Which process this is (its pid, rank, argv) and what it ran on."""
    return {
        "pid": os.getpid(),
        "rank": _int_env("RANK"),
        "local_rank": _int_env("LOCAL_RANK"),
        "argv": list(sys.argv),
        "torch_version": torch_version,
        "python_version": sys.version.split()[0],
        # Where this interpreter keeps its libraries: their files are spelled by import path.
        "interpreter": interpreter_record(),
    }


def program_import_paths() -> list[str]:
    """The program's own import paths (``sys.path`` as it ended, with what the program or
    PYTHONPATH added) that it imported a module from: `verify` and `fix` run the program in a
    copy that must hold them. Installed code, our bootstrap and an entry nothing was imported
    from are left out (PYTHONPATH naming a folder that holds a virtualenv would otherwise widen
    the copy to that folder's parent)."""
    installed = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}

    def is_installed(path: str) -> bool:
        parts = path.split(os.sep)
        return (
            "site-packages" in parts
            or "dist-packages" in parts
            or any(path == d or path.startswith(d + os.sep) for d in installed)
        )

    imported_from = {
        folder
        for name, module in list(sys.modules.items())
        if not name.startswith("recompile_fix")
        and isinstance(file := getattr(module, "__file__", None), str)
        and not is_installed(folder := os.path.dirname(os.path.abspath(file)))
    }
    found: list[str] = []
    for entry in sys.path:
        path = os.path.abspath(entry or os.curdir)
        if (
            not os.path.isdir(path)
            or is_installed(path)
            or os.path.exists(os.path.join(path, "sitecustomize.py"))  # ours (or a system one)
            or path in found
            or not any(d == path or d.startswith(path + os.sep) for d in imported_from)
        ):
            continue
        found.append(path)
    return found


def write_record(parts_dir: str, record: dict) -> None:
    """``part-<pid>.json``, written whole (a temporary file renamed into place)."""
    os.makedirs(parts_dir, exist_ok=True)
    path = os.path.join(parts_dir, f"part-{os.getpid()}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, path)


class PartFile:
    """``part-<pid>.jsonl``: the process header, then each compile and graph break as recorded,
    one JSON object a line, flushed. ``run._read_parts`` reads it when the process left no
    ``part-<pid>.json`` (it ended without atexit: ``os._exit``, a signal, the OOM killer)."""

    def __init__(self, header: Callable[[], dict]) -> None:
        self.header = header  # the process header, asked for when the first line is written
        self.handle: IO[str] | None = None
        self.path: str | None = None
        self.failed = False

    def append(self, kind: str, item: dict) -> None:
        parts_dir = os.environ.get(PARTS_DIR_ENV)
        if not parts_dir or self.failed:
            return
        try:
            if self.handle is None:
                os.makedirs(parts_dir, exist_ok=True)
                self.path = os.path.join(parts_dir, f"part-{os.getpid()}.jsonl")
                self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open, flushed per line)
                self.handle.write(json.dumps({"process": self.header()}) + "\n")
            self.handle.write(json.dumps({kind: item}) + "\n")
            self.handle.flush()
        except (OSError, TypeError, ValueError) as exc:
            self.failed = True
            print(f"recompile-fix: recorder cannot write {self.path}: {exc!r}", file=sys.stderr)

    def remove(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.remove(self.path)
        self.handle, self.path = None, None
