"""Golden cases: ``golden/RULE/CASE/`` holds ``program.in.py``, the ``profile.json`` the tool
recorded on it, ``program.out.py`` (what `apply` must write) and ``case.toml``, which says what
else the case expects. Every key is optional:

    unsafe-fixes = true        # apply with --unsafe-fixes --select RULE (the case's fix is unsafe)
    changes = false            # a negative case: the output is the input
    outputs = "exact"          # or "close": bit for bit, or within assert_close only ...
    why = "..."                # ... and why (test_tensor_constants requires it for RF002/3/6)
    compiles = "same"          # a compile-time fix: as many compiles as before (default: fewer)
    compiles = "regional"      # the whole model's frame compiled before, its blocks' after (RF007):
                               # outputs compared on the tensors the program keeps in globals
    compiled-once = ["fn"]     # these frames compiled more than once before and once after
    profile-backend = "program"  # record the Profile with the program's own backend, not eager
    requires = ["timm"]        # model code only the torch 2.14.1 lane installs (timm needs
                               # torchvision, which pins torch 2.14.1): the equivalence test is
                               # marked `timm` and runs there; apply's test runs in both lanes
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
_KEYS = {"unsafe-fixes", "changes", "outputs", "why", "compiles", "compiled-once", "profile-backend", "requires"}
# What a case may require, and the pytest marker of the lane that installs it.
LANE_PACKAGES = {"timm": "timm"}


@dataclass(frozen=True)
class Case:
    path: Path
    unsafe_fixes: bool = False
    changes: bool = True
    outputs: str | None = None  # "exact" / "close" / None (not stated: assert_close)
    why: str = ""
    compiles: str = "fewer"  # "fewer" / "same" / "regional"
    compiled_once: tuple[str, ...] = ()
    profile_backend: str = "eager"  # "eager" / "program" (the program's own: inductor by default)
    requires: tuple[str, ...] = ()  # packages only a lane installs (LANE_PACKAGES)

    @property
    def rule(self) -> str:
        return self.path.parent.name

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"


def load_case(path: Path) -> Case:
    spec = path / "case.toml"
    assert spec.exists(), f"{spec}: every golden case has one (an empty one takes every default)"
    data = tomllib.loads(spec.read_text(encoding="utf-8"))
    unknown = set(data) - _KEYS
    assert not unknown, f"{path}/case.toml: unknown keys {sorted(unknown)}"
    assert data.get("outputs") in (None, "exact", "close"), data
    assert data.get("compiles") in (None, "fewer", "same", "regional"), data
    assert data.get("profile-backend") in (None, "eager", "program"), data
    assert ("outputs" in data) == bool(data.get("why")), f"{path}/case.toml: say outputs and why together"
    assert set(data.get("requires", ())) <= set(LANE_PACKAGES), f"{path}/case.toml: requires {data['requires']}"
    return Case(
        path=path,
        unsafe_fixes=data.get("unsafe-fixes", False),
        changes=data.get("changes", True),
        outputs=data.get("outputs"),
        why=data.get("why", ""),
        compiles=data.get("compiles", "fewer"),
        compiled_once=tuple(data.get("compiled-once", ())),
        profile_backend=data.get("profile-backend", "eager"),
        requires=tuple(data.get("requires", ())),
    )


CASES = [load_case(p) for p in sorted(GOLDEN.glob("RF*/*")) if (p / "program.in.py").exists()]


def case_id(case: Case) -> str:
    return case.id


def stage_case(case: Path, work: Path, old: str = "", new: str = "") -> Path:
    """``case``'s ``program.in.py`` as ``work/program.py`` (``old`` replaced by ``new``, line for
    line), beside its ``profile.json``, whose digest of the program is made to match: a Profile
    recorded on the program as edited."""
    text = (case / "program.in.py").read_text()
    if old:
        assert old in text, f"{case}: {old!r} is not in program.in.py"
        text = text.replace(old, new)
    work.mkdir(parents=True, exist_ok=True)
    (work / "program.py").write_text(text)
    data = json.loads((case / "profile.json").read_text())
    data["sources"]["program.py"] = hashlib.sha256(text.encode()).hexdigest()
    (work / "profile.json").write_text(json.dumps(data))
    return work
