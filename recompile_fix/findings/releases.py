"""Which torch release runs what a rule writes. Each rule declares, in ``Rule.emits``, every torch
API its fixes insert (or its notes suggest) and the first release that has it; its own gates read
those declarations, ``check_edits`` refuses an edit that names an API the Finding's release lacks
(the Profile's torch, or in static mode the installed one), and ``release_table`` renders them
as docs/torch-releases.md (a test keeps that file equal to it).

Boundaries are the first release seen to have the API: measured on 2.6.0, 2.8.0, 2.10.0, 2.13.0,
2.14.1 and 2.15.0 (issue 18), else taken from the PyTorch change that added it (``checked``).
An unmeasured release in between counts as not having it, so no edit is made there.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recompile_fix.profile.model import torch_release

if TYPE_CHECKING:  # names only: a Rule declares TorchApis, this module reads them
    from recompile_fix.edits.edit import Edit
    from recompile_fix.findings.rule import Rule

__all__ = ["RELEASES", "TorchApi", "check_edits", "installed_torch_version", "release_table"]

# The releases the table shows: the oldest users run to the newest on the package index.
RELEASES: tuple[tuple[int, int], ...] = tuple((2, minor) for minor in range(4, 16))


@dataclass(frozen=True)
class TorchApi:
    """One thing a rule writes into the user's code (``use="code"``) or suggests in a note
    (``use="note"``), and the first release that runs it (None: every release in RELEASES)."""

    name: str  # as written, ``torch.`` first: torch.compiler.nested_compile_region
    since: tuple[int, int] | None
    checked: str  # where the boundary comes from
    use: str = "code"
    # A semantic gate (what a release does with the code, not whether the name exists) is not
    # looked for in edit text: the rule applies it itself.
    in_text: bool = True

    def runs_on(self, release: tuple[int, int] | None) -> bool:
        return self.since is None or (release is not None and release >= self.since)

    @property
    def since_text(self) -> str:
        return "any" if self.since is None else f"{self.since[0]}.{self.since[1]}"

    def pattern(self) -> re.Pattern[str]:
        """The name as an edit spells it, whatever the file calls torch (``th.compiler.x``)."""
        rest = self.name.split(".", 1)[1] if self.name.startswith("torch.") else self.name
        return re.compile(r"(?<![\w.])\w+\." + re.escape(rest) + r"\b")


@functools.lru_cache(maxsize=1)
@functools.cache
def installed_torch_version() -> str | None:
    """The installed torch's version, without importing it (static mode's release)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def check_edits(rule: Rule, edits: list[Edit], torch_version: str | None) -> str | None:
    """Why these edits must not be written for ``torch_version``, or None. An API whose
    boundary is not "any" needs a known release at or after it."""
    release = torch_release(torch_version)
    text = "".join(edit.new_text for edit in edits)
    for api in rule.emits:
        if api.use != "code" or not api.in_text or api.runs_on(release):
            continue
        if api.pattern().search(text):
            have = f"torch {torch_version}" if torch_version else "an unknown torch version"
            return f"{have} has no `{api.name}` (it arrived in {api.since_text}): not written"
    return None


def release_table(rules: tuple[Rule, ...]) -> str:
    """docs/torch-releases.md: per rule, what it writes (or suggests) on which release."""
    header = ["rule", "API", "use", "since", *(f"{major}.{minor}" for major, minor in RELEASES), "boundary"]
    lines = [
        "# What each rule writes, per torch release",
        "",
        "Generated from each rule's `emits` (`release_table` in recompile_fix/findings/releases.py);",
        "tests/test_releases.py checks this file against it (`pytest tests/test_releases.py",
        "--update-golden` rewrites it). A fix is written only for a release marked `yes`: the",
        "Profile's torch, or in static mode the installed one; elsewhere the Finding has no fix and",
        "says why. `note`: suggested in a note, never written. A release not measured between two",
        "that were counts as `no`.",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    for rule in rules:
        for api in rule.emits:
            cells = ["yes" if api.runs_on(release) else "no" for release in RELEASES]
            lines.append(
                "| " + " | ".join([rule.id, f"`{api.name}`", api.use, api.since_text, *cells, api.checked]) + " |"
            )
    return "\n".join(lines) + "\n"
