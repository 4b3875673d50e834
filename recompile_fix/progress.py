"""Progress of the steps that run the user's program (`profile`, `verify`, `apply --verify`,
`fix`): which run, which round, seconds so far and the program's last output line, redrawn in
place on a terminal; one closing line per run, where a crashed run reads as crashed. Quiet when
stdout or stderr is not a terminal (a pipe, a CI log, a test), unless ``RECOMPILE_FIX_PROGRESS``
is ``1`` (or ``0`` to silence a terminal)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

__all__ = ["PROGRESS_ENV", "Progress", "RunLine", "last_output_line"]

PROGRESS_ENV = "RECOMPILE_FIX_PROGRESS"
_TICK = 0.5  # seconds between redraws
_TAIL = 4096  # bytes of the log read for its last line
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


def _on_terminal() -> bool:
    forced = os.environ.get(PROGRESS_ENV)
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stdout.isatty() and sys.stderr.isatty()


def last_output_line(log: Path | None) -> str:
    """The last non-empty line the program wrote to ``log`` (a progress bar's last redraw
    included), without terminal control sequences; "" when there is none."""
    if log is None:
        return ""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    for line in reversed(re.split(r"[\r\n]", tail)):
        line = _CONTROL.sub("", line).strip()
        if line:
            return line
    return ""


@dataclass
class RunLine:
    """One run being shown; ``finish`` says how it ended."""

    label: str
    exit_code: int | None = None
    exception: str | None = None

    def finish(self, exit_code: int, exception: str | None = None) -> None:
        self.exit_code, self.exception = exit_code, exception


class Progress:
    """Where progress goes (stderr), and whether it is shown at all."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = _on_terminal() if enabled is None else enabled

    def say(self, text: str) -> None:
        """A line of its own (a round starting, what a round kept)."""
        if self.enabled:
            self.stream.write(text + "\n")
            self.stream.flush()

    @contextmanager
    def run(self, label: str, log: Path | None = None, *, live_output: bool = False) -> Iterator[RunLine]:
        """Show ``label`` while the block runs the program: seconds so far and the last line of
        ``log``, redrawn in place. ``live_output``: the program writes to this terminal itself
        (`profile`), so only a line before and a line after. Then one line: how it ended."""
        shown = RunLine(label)
        if not self.enabled:
            yield shown
            return
        started = time.monotonic()
        stop = threading.Event()
        ticker = None
        if live_output:
            self.say(f"{label} ...")
        else:
            ticker = threading.Thread(target=self._tick, args=(label, log, started, stop), daemon=True)
            ticker.start()
        try:
            yield shown
        except BaseException:
            self._end(f"{label}: stopped after {time.monotonic() - started:.0f} s", stop, ticker)
            raise
        seconds = time.monotonic() - started
        if shown.exit_code:
            why = f": {shown.exception}" if shown.exception else ""
            end = f"{label}: CRASHED (exit code {shown.exit_code}) after {seconds:.0f} s{why}"
        else:
            end = f"{label}: {seconds:.0f} s"
        self._end(end, stop, ticker)

    def _end(self, text: str, stop: threading.Event, ticker: threading.Thread | None) -> None:
        stop.set()
        if ticker is not None:
            ticker.join()
            self.stream.write("\r\x1b[2K")
        self.stream.write(self._fit(text, wrap=True) + "\n")
        self.stream.flush()

    def _tick(self, label: str, log: Path | None, started: float, stop: threading.Event) -> None:
        while True:
            line = f"{label} ... {time.monotonic() - started:.0f} s"
            last = last_output_line(log)
            if last:
                line += f"  | {last}"
            self.stream.write("\r\x1b[2K" + self._fit(line))
            self.stream.flush()
            if stop.wait(_TICK):
                return

    @staticmethod
    def _fit(text: str, wrap: bool = False) -> str:
        width = shutil.get_terminal_size((100, 24)).columns - 1
        if wrap or len(text) <= width:
            return text
        return text[: max(0, width - 1)] + "\u2026"
