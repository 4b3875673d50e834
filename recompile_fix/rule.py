"""The shape every rule in rules/ has. A rule is one file: its docs (the class docstring, in the
shape What it does / Why is this bad? / Example / Fix safety / Profile evidence), the reasons it
consumes, how it plans Findings, how it turns one into Edits, and its examples."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

from recompile_fix.edits import Edit
from recompile_fix.findings import Finding
from recompile_fix.profile import Profile
from recompile_fix.source import SourceFile


@dataclass(frozen=True)
class Example:
    """A before/after pair for the docs (the golden files hold the full, recorded cases)."""

    before: str
    after: str


class Project:
    """The sources a rule may read, parsed once each. Resolves Profile paths against a root."""

    def __init__(self, root, expected_hashes: dict[str, str] | None = None):
        self.root = Path(root)
        self.expected_hashes = expected_hashes
        self.stale: set[str] = set()  # files whose bytes are not the ones the Profile saw
        self.errors: dict[str, str] = {}  # path -> why it could not be read or parsed
        self._cache: dict[str, SourceFile | Exception] = {}

    def source(self, path: str) -> SourceFile | None:
        """The parsed file, or None when it is unreadable, unparsable or changed since profiling
        (a rule must not place a fix by line numbers that no longer hold)."""
        from recompile_fix.profile import resolve, same_as_profiled

        if path not in self._cache:
            try:
                file = resolve(path, self.root)
                data = file.read_bytes()
                if self.expected_hashes is not None and not same_as_profiled(data, self.expected_hashes.get(path)):
                    self.stale.add(path)
                    raise LookupError(f"{path} changed since it was profiled")
                self._cache[path] = SourceFile.read(Path(path), data)
            except Exception as exc:  # apply reports unreadable files on its own
                if not isinstance(exc, LookupError):
                    self.errors[path] = str(exc)
                self._cache[path] = exc
        value = self._cache[path]
        return None if isinstance(value, Exception) else value


class Rule:
    id: str = ""
    name: str = ""
    message: str = ""
    # Reason kinds (see recompile_fix.profile.REASON_KINDS) this rule turns into fixes.
    consumes: tuple[str, ...] = ()
    # Substrings without which the rule cannot fire in a file (a cheap prefilter): a file needs
    # one of ``triggers`` and every one of ``requires``.
    triggers: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()
    # What `verify` must not count against this rule's fix because the fix does it on purpose:
    # "graph_breaks" (more graph breaks) and/or "resume_frames" (new torch_dynamo_resume_in_*
    # frames compiling). E.g. a fix that inserts torch._dynamo.graph_break().
    verify_allows: tuple[str, ...] = ()

    def may_fire(self, data: bytes) -> bool:
        """Whether a file with these bytes can hold the rule's pattern at all."""
        return (not self.triggers or any(t.encode() in data for t in self.triggers)) and all(
            r.encode() in data for r in self.requires
        )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        """Findings from a Profile."""
        return []

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        """Findings from the source alone (static mode); most rules need a Profile."""
        return []

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        """The edits for one finding. ``torch_name`` is how the file spells ``torch``."""
        raise NotImplementedError

    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")
