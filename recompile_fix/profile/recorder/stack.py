"""The user's frames on the Python stack: where a compile was called from (with the column span of
the calling expression, so the rewrite finds the exact call), and the user's frame past library
code that made the call. torch's frames, ours and the standard library's are never the user's."""

from __future__ import annotations

import os
import sys
import types

__all__ = ["is_internal", "is_library", "note_torch_dir", "user_frame_past_library", "user_stack"]

_torch_dir: str | None = None  # set by note_torch_dir once torch is imported
# The recompile_fix package (this file is recompile_fix/profile/recorder/stack.py).
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The standard library's wrappers (contextlib, functools, runpy) are never the user's call site.
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_MAX_STACK = 12
_LIBRARY_PARTS = ("site-packages", "dist-packages")


def note_torch_dir(directory: str) -> None:
    """Frames from torch's tree (``directory``) are torch's, never the user's call site."""
    global _torch_dir
    _torch_dir = directory


def is_internal(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    if "site-packages" not in path and path.startswith(_STDLIB_DIR + os.sep):
        return True
    return (_torch_dir is not None and path.startswith(_torch_dir)) or path.startswith(_OWN_DIR)


def is_library(filename: str) -> bool:
    parts = os.path.abspath(filename).split(os.sep)
    return any(part in _LIBRARY_PARTS for part in parts)


def _frame_location(frame: types.FrameType) -> dict:
    code = frame.f_code
    line = frame.f_lineno
    end_line = col = end_col = None
    try:
        # 3.11+: the span of the instruction being run, i.e. the whole call expression.
        positions = list(code.co_positions())[frame.f_lasti // 2]
        if positions[0] is not None:
            line, end_line, col, end_col = positions
    except (AttributeError, IndexError):
        pass
    return {
        "file": os.path.abspath(code.co_filename),
        "line": line,
        "end_line": end_line,
        "col": col,
        "end_col": end_col,
        "function": code.co_name,
    }


def user_stack(skip_frames: int = 1) -> list[dict]:
    """The user's frames on the current stack, outermost first (torch and runpy frames dropped)."""
    frames: list[dict] = []
    frame: types.FrameType | None = sys._getframe(skip_frames)
    while frame is not None and len(frames) < _MAX_STACK:
        if not is_internal(frame.f_code.co_filename):
            frames.append(_frame_location(frame))
        frame = frame.f_back
    frames.reverse()
    return frames


def user_frame_past_library(frame: types.FrameType | None) -> types.FrameType | None:
    """The user's frame that called library code which called the compiled code (a
    ``model.generate()``, a Trainer), or None when the user's code made the call itself."""
    through_library = False
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_internal(filename):
            if not is_library(filename):
                return frame if through_library else None
            through_library = True
        frame = frame.f_back
    return None
