"""Where the interpreter that ran keeps its libraries, and how a Profile spells their files.

A library file (torch's ``optim/adam.py``, a transformers model) is recorded by its import path
under a named root, ``/site-packages/torch/optim/adam.py`` or ``/stdlib/json/decoder.py``, not
where one machine's virtualenv put it: the Profile holds in a clone at another path, in CI, and
whether the virtualenv lies inside the project (``.venv``, ``venv``, ``env``, a conda prefix) or
outside it. The spelling is absolute on purpose: every stage already treats an absolute path as
"not the project's own code, never edited". Which directories are the interpreter's comes from
the run itself (``Interpreter``: its ``sys.prefix``, site-packages and stdlib, recorded by the
recorder), not from where the files lie relative to the project."""

from __future__ import annotations

import os
import re
import site
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "SITE_ROOT",
    "STDLIB_ROOT",
    "Interpreter",
    "current_interpreter",
    "is_library_spelling",
    "locate_library_file",
    "spell_library_file",
    "spell_library_paths_in",
]

SITE_ROOT = "/site-packages"  # an installed package's file: /site-packages/torch/optim/adam.py
STDLIB_ROOT = "/stdlib"  # the standard library's: /stdlib/json/decoder.py
PREFIX_ROOT = "/python-prefix"  # anything else under the interpreter's prefix (a conda env's)
_ROOTS = (SITE_ROOT, STDLIB_ROOT, PREFIX_ROOT)
_LIBRARY_PARTS = ("site-packages", "dist-packages")
# A standard library's layout where no interpreter says (a TORCH_TRACE, an older Profile):
# ``<prefix>/lib/python3.11/<module>`` (POSIX) or ``<prefix>/Lib/<module>`` (Windows), where
# <module> is one of the standard library's own top-level names.
_STDLIB_LAYOUT = re.compile(r"(?:^|[\\/])(?:lib[\\/]python3\.\d+t?|Lib)[\\/](?P<rest>[^\\/]+(?:[\\/].*)?)$")
_STDLIB_NAMES = frozenset(getattr(sys, "stdlib_module_names", ()))


@dataclass
class Interpreter:
    """The directories of the interpreter that ran the program (``Profile.interpreter``): spelled
    relative to the profiled directory where they lie under it (``.venv/lib/python3.11/...``),
    absolute otherwise."""

    prefix: str
    site: list[str] = field(default_factory=list)  # site-packages / dist-packages / purelib / platlib
    stdlib: list[str] = field(default_factory=list)

    @classmethod
    def from_record(cls, raw: Any) -> "Interpreter | None":
        if not isinstance(raw, dict) or not isinstance(raw.get("prefix"), str):
            return None
        return cls(
            prefix=raw["prefix"],
            site=[p for p in raw.get("site", []) if isinstance(p, str)],
            stdlib=[p for p in raw.get("stdlib", []) if isinstance(p, str)],
        )

    def relative_to(self, root: str) -> "Interpreter":
        def spell(path: str) -> str:
            absolute, base = os.path.abspath(path), os.path.abspath(root)
            return os.path.relpath(absolute, base) if absolute.startswith(base + os.sep) else absolute

        return Interpreter(spell(self.prefix), [spell(p) for p in self.site], [spell(p) for p in self.stdlib])

    def absolute(self, root: str | os.PathLike[str]) -> "Interpreter":
        def place(path: str) -> str:
            return path if os.path.isabs(path) else os.path.normpath(os.path.join(os.fspath(root), path))

        return Interpreter(place(self.prefix), [place(p) for p in self.site], [place(p) for p in self.stdlib])

    def prefixes(self) -> list[str]:
        return [self.prefix]


_PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?(\.exe)?")


def is_python(program: str) -> bool:
    """Whether ``program`` (a path or a name on PATH) is a Python interpreter by its name:
    ``python``, ``python3``, ``python3.11``, ``python.exe``."""
    return _PYTHON_NAME.fullmatch(os.path.basename(program)) is not None


def current_interpreter() -> Interpreter:
    """This interpreter's directories (the recorder records the program's the same way)."""
    return Interpreter.from_record(interpreter_record()) or Interpreter(prefix=sys.prefix)


def interpreter_record() -> dict[str, Any]:
    """What the recorder writes (``record["interpreter"]``): plain data, standard library only."""
    site_dirs: list[str] = []
    paths = sysconfig.get_paths()
    candidates = [paths.get("purelib"), paths.get("platlib")]
    try:
        candidates += list(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = getattr(site, "getusersitepackages", None)
    if callable(user) and site.ENABLE_USER_SITE:
        candidates.append(user())
    for entry in [*candidates, *sys.path]:
        if not entry:
            continue
        path = os.path.abspath(entry)
        if (entry in candidates or os.path.basename(path) in _LIBRARY_PARTS) and path not in site_dirs:
            site_dirs.append(path)
    stdlib = []
    for key in ("stdlib", "platstdlib"):
        directory = paths.get(key)
        if directory and os.path.abspath(directory) not in stdlib:
            stdlib.append(os.path.abspath(directory))
    return {"prefix": os.path.abspath(sys.prefix), "site": site_dirs, "stdlib": stdlib}


def _under(path: str, directory: str) -> str | None:
    directory = os.path.abspath(directory)
    return os.path.relpath(path, directory) if path.startswith(directory + os.sep) else None


def spell_library_file(path: str, interpreter: Interpreter | None = None) -> str | None:
    """How a Profile spells ``path`` when it is a library file (its import path under
    ``/site-packages`` or ``/stdlib``), else None. The interpreter's own directories decide;
    a path with a ``site-packages`` or ``dist-packages`` part, or a standard library module
    under ``lib/python3.X`` (a TORCH_TRACE, which names no interpreter; a trace from another
    machine; a run recorded before the interpreter was) is one too. The recorder's Profile and
    the trace reader's spell every file through this one function."""
    absolute = os.path.abspath(path)
    # Longest directory first: a venv's site-packages lies under its stdlib and its prefix.
    for directory in sorted(interpreter.site if interpreter else [], key=len, reverse=True):
        rest = _under(absolute, directory)
        if rest is not None:
            return f"{SITE_ROOT}/{Path(rest).as_posix()}"
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _LIBRARY_PARTS and i + 1 < len(parts):
            return f"{SITE_ROOT}/{'/'.join(parts[i + 1 :])}"
    if interpreter is not None:
        for directory in sorted(interpreter.stdlib, key=len, reverse=True):
            rest = _under(absolute, directory)
            if rest is not None:
                return f"{STDLIB_ROOT}/{Path(rest).as_posix()}"
        rest = _under(absolute, interpreter.prefix)
        if rest is not None:
            return f"{PREFIX_ROOT}/{Path(rest).as_posix()}"
    return _stdlib_by_layout(path)


def _stdlib_by_layout(path: str) -> str | None:
    """``/stdlib/<rest>`` for a file that lies where a standard library does
    (``.../lib/python3.11/contextlib.py``), by the layout alone."""
    match = _STDLIB_LAYOUT.search(path)
    if match is None:
        return None
    rest = match.group("rest").replace("\\", "/")
    top = rest.split("/", 1)[0]
    name = top[: -len(".py")] if top.endswith(".py") else top
    if name not in _STDLIB_NAMES or ("/" not in rest and not top.endswith(".py")):
        return None
    return f"{STDLIB_ROOT}/{rest}"


_ENV_FILE = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[\\/][^\s\"'<>|]*?[\\/](?:site|dist)-packages[\\/]")


def spell_library_paths_in(text: str, interpreter: Interpreter | None = None) -> str:
    """``text`` (torch's guard text, with its stack trace) with every library file in it spelled
    as the Profile spells it, so no machine's virtualenv path is kept."""
    for directory in sorted(interpreter.site if interpreter else [], key=len, reverse=True):
        text = text.replace(os.path.abspath(directory) + os.sep, SITE_ROOT + "/")
    return _ENV_FILE.sub(SITE_ROOT + "/", text)


def is_library_spelling(path: str) -> bool:
    """Is ``path`` a Profile's spelling of a library file (``/site-packages/...``)?"""
    normal = path.replace("\\", "/")
    return any(normal.startswith(root + "/") for root in _ROOTS)


def locate_library_file(path: str, interpreter: Interpreter | None, root: str | os.PathLike[str]) -> Path | None:
    """The file on this machine a library spelling names: under the recorded interpreter's
    directories (relative ones against ``root``), else this interpreter's (a clone elsewhere,
    CI). None when ``path`` is no library spelling; a path that does not exist when found
    nowhere."""
    normal = path.replace("\\", "/")
    for name in _ROOTS:
        if normal.startswith(name + "/"):
            rest = normal[len(name) + 1 :]
            break
    else:
        return None
    candidates: list[str] = []
    for interp in ([interpreter.absolute(root)] if interpreter is not None else []) + [current_interpreter()]:
        dirs = {SITE_ROOT: interp.site, STDLIB_ROOT: interp.stdlib, PREFIX_ROOT: interp.prefixes()}[name]
        candidates += dirs
    for directory in candidates:
        file = Path(directory, rest)
        if file.exists():
            return file
    return Path(candidates[0], rest) if candidates else Path(path)
