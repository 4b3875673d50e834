"""The one error type that the command line turns into a one-line message and exit code 2, and
the interruption (Ctrl-C, SIGTERM) it turns into one line and exit code 128 + the signal."""

from typing import Any

__all__ = ["Interrupted", "UserError"]


class UserError(Exception):
    """Bad input from the user: a missing command, a truncated Profile, a path outside the project."""


class Interrupted(Exception):
    """The user's program was stopped by a signal we forwarded to it (Ctrl-C, SIGTERM), or we
    were told to abort. ``partial``: what the stopped run left (a Profile), None when aborted."""

    def __init__(self, signum: int, partial: Any = None, aborted: bool = False):
        super().__init__(signum)
        self.signum, self.partial, self.aborted = signum, partial, aborted

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
