"""`[tool.recompile-fix]` in pyproject.toml, merged with the command line (the command line wins).

    [tool.recompile-fix]
    select = ["RF"]               # rule-id prefixes to run
    ignore = ["RF005"]            # prefixes to leave out
    unsafe-fixes = false
    profile = ".recompile-fix/profile.json"
    exclude = ["third_party/"]    # globs, added to the default excludes
    per-file-ignores = { "tests/*" = ["RF001"] }

An unknown key is an error (exit 2), as in ruff: a typo must not silently do nothing.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from recompile_fix.errors import UserError

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_PROFILE",
    "Config",
    "check_selectors",
    "enter_project",
    "find_project_root",
    "find_pyproject",
    "load_config",
    "split_ids",
]

DEFAULT_PROFILE = ".recompile-fix/profile.json"
DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    ".recompile-fix",
    ".mypy_cache",
    ".pytest_cache",
)
_KEYS = {"select", "ignore", "unsafe-fixes", "profile", "exclude", "per-file-ignores"}


@dataclass
class Config:
    root: Path
    select: list[str] = field(default_factory=lambda: ["RF"])
    ignore: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    profile: str = DEFAULT_PROFILE
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    source: Path | None = None  # the pyproject.toml it came from

    def rule_enabled(self, rule_id: str, path: str | None = None) -> bool:
        rule_id = rule_id.upper()
        if not any(rule_id.startswith(p.upper()) for p in self.select):
            return False
        ignored = list(self.ignore)
        if path is not None:
            for pattern, ids in self.per_file_ignores.items():
                if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern):
                    ignored.extend(ids)
        return not any(rule_id.startswith(p.upper()) for p in ignored)

    def excluded(self, relative: str) -> bool:
        """Does a pattern match the path, or one of its parts (``build`` excludes ``a/build/x.py``)?"""
        part_pattern, path_pattern = self._exclude_patterns
        relative = os.path.normcase(relative)
        # Split as text: a Path per call was most of a large tree's walk.
        parts = (relative.replace(os.altsep, os.sep) if os.altsep else relative).split(os.sep)
        return any(part_pattern.match(part) for part in parts if part not in ("", ".")) or bool(
            path_pattern.match(relative)
        )

    @functools.cached_property
    def _exclude_patterns(self) -> tuple[re.Pattern[str], re.Pattern[str]]:
        # One regex for all globs: a large tree asks this for every file and directory.
        globs = [os.path.normcase(p.rstrip("/")) for p in (*DEFAULT_EXCLUDE, *self.exclude)]
        parts = "|".join(fnmatch.translate(g) for g in globs)
        paths = "|".join(fnmatch.translate(g) + "|" + fnmatch.translate(g + "/*") for g in globs)
        return re.compile(parts), re.compile(paths)

    def check_selectors(self, rule_ids: Iterable[str]) -> None:
        """Each selector the file gives must select a rule (ruff: "Unknown rule selector")."""
        rule_ids = list(rule_ids)
        where = f"{self.source}: [tool.recompile-fix] " if self.source is not None else ""
        check_selectors(self.select, rule_ids, f"{where}select")
        check_selectors(self.ignore, rule_ids, f"{where}ignore")
        for pattern, ids in self.per_file_ignores.items():
            check_selectors(ids, rule_ids, f"{where}per-file-ignores {pattern!r}")

    def fingerprint(self) -> str:
        """What a cached result depends on besides the file and the tool version."""
        data = json.dumps([self.select, self.ignore, self.per_file_ignores], sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]


def find_pyproject(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def find_project_root(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The project a command run from ``start`` (default: the current directory) works on, as
    ruff finds its configuration: the nearest directory at or above it that holds the Profile
    (``.recompile-fix/profile.json``, or the ``profile`` its pyproject.toml's
    [tool.recompile-fix] names). A Profile's paths are relative to the directory profiled
    from, which is where its ``.recompile-fix/`` is. None when there is none."""
    here = Path(start or os.getcwd()).resolve()
    for directory in (here, *here.parents):
        candidates = [directory / DEFAULT_PROFILE]
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file():
            try:
                table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("recompile-fix", {})
            except (OSError, tomllib.TOMLDecodeError, AttributeError):
                table = {}  # load_config reports a broken file when it reads it
            if isinstance(table, dict) and isinstance(table.get("profile"), str):
                candidates.insert(0, directory / table["profile"])
        if any(c.is_file() for c in candidates):
            return directory
    return None


def enter_project(paths: Iterable[str] = ()) -> list[str]:
    """Work from the project's root (``find_project_root``), as a command run there would:
    change to it and return ``paths`` spelled from there (``apply .`` in a subfolder applies
    the findings under that subfolder). The search starts where the paths are, where they are
    all below here: `apply rl` from above a project profiled in `rl/` works on that project,
    not on another Profile further up. Where no Profile is found, nothing changes."""
    here = Path.cwd().resolve()
    start = here
    given = [Path(p).resolve() for p in paths]
    if given:
        common = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in given]))
        if common == here or here in common.parents:
            start = common
    root = find_project_root(start)
    if root is None or root == here:
        return list(paths)
    spelled = [os.path.relpath(os.path.abspath(p), root) for p in paths]
    os.chdir(root)
    return spelled


def _ids(value: object, key: str, where: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: [tool.recompile-fix] {key} must be a list of rule-id prefixes")
    return [v.strip().upper() for v in value]


def load_config(start: str | os.PathLike[str] | None = None, explicit: str | None = None) -> Config:
    start_dir = Path(start or os.getcwd()).resolve()
    path = Path(explicit) if explicit else find_pyproject(start_dir)
    if path is None:
        return Config(root=start_dir)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot read configuration: {exc}") from None
    table = data.get("tool", {}).get("recompile-fix")
    if table is None:
        return Config(root=start_dir if not explicit else path.parent, source=None)
    unknown = set(table) - _KEYS
    if unknown:
        raise UserError(f"{path}: unknown key(s) in [tool.recompile-fix]: {', '.join(sorted(unknown))}")
    config = Config(root=path.parent.resolve(), source=path)
    if "select" in table:
        config.select = _ids(table["select"], "select", path)
    if "ignore" in table:
        config.ignore = _ids(table["ignore"], "ignore", path)
    if "unsafe-fixes" in table:
        if not isinstance(table["unsafe-fixes"], bool):
            raise UserError(f"{path}: [tool.recompile-fix] unsafe-fixes must be true or false")
        config.unsafe_fixes = table["unsafe-fixes"]
    if "profile" in table:
        config.profile = str(table["profile"])
    if "exclude" in table:
        config.exclude = [str(e) for e in table["exclude"]]
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise UserError(f"{path}: [tool.recompile-fix] per-file-ignores must be a table of glob = [ids]")
        config.per_file_ignores = {k: _ids(v, "per-file-ignores", path) for k, v in pfi.items()}
    return config


def check_selectors(selectors: Iterable[str], rule_ids: Iterable[str], where: str) -> None:
    """A selector is a rule id or a prefix of one (``RF``, ``RF00``, ``RF001``); one that selects
    no rule is an error (exit 2), as in ruff: a typo must not silently select nothing."""
    ids = [r.upper() for r in rule_ids]
    for selector in selectors:
        if not any(rule_id.startswith(selector.upper()) for rule_id in ids):
            raise UserError(f"{where}: Unknown rule selector: `{selector}` (`recompile-fix rules` lists the rules)")


def split_ids(option: str | None) -> list[str] | None:
    """`--select RF001,RF2` -> ['RF001', 'RF2']."""
    if option is None:
        return None
    return [part.strip().upper() for part in option.split(",") if part.strip()]
