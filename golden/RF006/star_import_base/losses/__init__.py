"""The project's losses package: its names come from its modules by star import."""

from .base import *  # noqa: F403
