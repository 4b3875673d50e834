"""The one error type that the command line turns into a one-line message and exit code 2."""

__all__ = ["UserError"]


class UserError(Exception):
    """Bad input from the user: a missing command, a truncated Profile, a path outside the project."""
