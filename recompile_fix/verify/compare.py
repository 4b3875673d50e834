"""Before against after: frame statistics matched across the two runs, the recorded tensors
compared call by call, and what got worse."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import asdict, dataclass, field

from recompile_fix.findings.finding import Finding
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.compiled_outputs import ALL_NAN, DEFAULT_CALLS, compare
from recompile_fix.profile.model import Frame, Profile
from recompile_fix.profile.resume import is_resume, without_line
from recompile_fix.report import short_path
from recompile_fix.verify.judge import NO_OP, Tolerance, changes_nothing, proof_tolerance, unproven_in
from recompile_fix.verify.runs import CallableOutputs, Run, judge_pairs

__all__ = [
    "STATS",
    "FrameRow",
    "OutputRow",
    "Tolerance",
    "Verification",
    "allowances",
    "compare_outputs",
    "compare_runs",
    "compare_tensors",
    "match_frames",
]


def compare_tensors(before, after, tolerance: Tolerance) -> tuple[bool, float | None, str]:
    """(same?, max abs difference, what differs)."""
    return compare(before, after, exact=tolerance.exact, rtol=tolerance.rtol, atol=tolerance.atol)


@dataclass
class OutputRow:
    key: str
    label: str
    file: str
    line: int
    calls_before: int | None
    calls_after: int | None
    compared: int = 0  # tensors compared
    all_nan: int = 0  # of them, NaN everywhere in both runs: equal, and no evidence of the values
    same: bool = True
    max_abs_diff: float | None = None
    detail: str = ""


def compare_outputs(
    before: dict[str, CallableOutputs], after: dict[str, CallableOutputs], tolerance: Tolerance
) -> list[OutputRow]:
    rows = []
    pairs = list(_tensor_pairs(before, after))
    # All at once: in this process, or in the user's interpreter when this one has no torch.
    judged = iter(judge_pairs(pairs, tolerance, _interpreter(before, after)))
    for key in list(before) + [k for k in after if k not in before]:
        b, a = before.get(key), after.get(key)
        some = b if b is not None else after[key]
        if (b is None or a is None) and some.name == "globals":
            continue  # a name that holds tensors in one run only (a float the fix made a tensor)
        row = OutputRow(
            key=key,
            label=some.label,
            file=some.file,
            line=some.line,
            calls_before=b.calls if b else None,
            calls_after=a.calls if a else None,
        )
        rows.append(row)
        if b is None or a is None:
            row.same = False
            row.detail = "compiled only after the fix" if b is None else "not compiled after the fix"
            continue
        if b.calls != a.calls:
            row.same = False
            row.detail = f"called {b.calls} times before, {a.calls} after"
        for i, (b_call, a_call) in enumerate(zip(b.outputs, a.outputs)):
            if len(b_call) != len(a_call):
                row.same = False
                row.detail = row.detail or f"call {i + 1}: {len(b_call)} tensors before, {len(a_call)} after"
                continue
            for j in range(len(b_call)):
                same, diff, why = next(judged)
                row.compared += 1
                row.all_nan += same and why == ALL_NAN
                if diff is not None:
                    row.max_abs_diff = max(row.max_abs_diff or 0.0, diff)
                if not same:
                    if row.same or not row.detail:
                        row.detail = f"call {i + 1}, tensor {j + 1}: {why}"
                    row.same = False
    rows.sort(key=lambda r: (r.file, r.line, r.key))
    return rows


def _tensor_pairs(before: dict[str, CallableOutputs], after: dict[str, CallableOutputs]):
    """The (before, after) tensors ``compare_outputs`` compares, in the order it reads them."""
    for key in before:
        b, a = before[key], after.get(key)
        if a is None:
            continue
        for b_call, a_call in zip(b.outputs, a.outputs):
            if len(b_call) == len(a_call):
                yield from zip(b_call, a_call)


def _interpreter(before: dict[str, CallableOutputs], after: dict[str, CallableOutputs]) -> str | None:
    return next((o.interpreter for o in (*before.values(), *after.values()) if o.interpreter), None)


def frame_stats(frame: Frame) -> dict:
    return {
        "compiles": frame.compile_count,  # torch's count: a recompile-limit hit is no compile
        "recompiles": frame.recompiles,
        "limit_hits": frame.limit_hits,
        "compile_seconds": round(frame.compile_seconds, 6),
        "graph_breaks": sum(b.count for b in frame.graph_breaks),
    }


STATS = ("compiles", "recompiles", "limit_hits", "graph_breaks")
_STAT_WORDS = {
    "compiles": "more compiles",
    "recompiles": "more recompiles",
    "limit_hits": "more recompile-limit hits",
    "graph_breaks": "more graph breaks",
}


@dataclass
class FrameRow:
    name: str
    file: str
    line_before: int | None
    line_after: int | None
    before: dict | None
    after: dict | None
    # "same" / "close" (within the tolerance, not bit for bit) / "differ": outputs of the
    # callables compiled as this frame
    outputs: str | None = None

    @property
    def label(self) -> str:
        line = self.line_before if self.line_before is not None else self.line_after
        return f"{self.name} ({short_path(self.file)}:{line})"  # a library's as report spells it

    def value(self, stat: str, side: str):
        data = self.before if side == "before" else self.after
        return 0 if data is None else data[stat]


def match_frames(before: Profile, after: Profile) -> list[FrameRow]:
    def groups(profile):
        out: dict[tuple, list[Frame]] = {}
        for frame in sorted(profile.frames, key=lambda f: (f.file, f.first_line, f.name)):
            out.setdefault((frame.file, without_line(frame.name)), []).append(frame)
        return out

    b_groups, a_groups = groups(before), groups(after)
    rows = []
    for key in list(b_groups) + [k for k in a_groups if k not in b_groups]:
        b_list, a_list = b_groups.get(key, []), a_groups.get(key, [])
        for i in range(max(len(b_list), len(a_list))):
            b = b_list[i] if i < len(b_list) else None
            a = a_list[i] if i < len(a_list) else None
            some = b if b is not None else a_list[i]
            rows.append(
                FrameRow(
                    name=some.name,
                    file=some.file,
                    line_before=b.first_line if b else None,
                    line_after=a.first_line if a else None,
                    before=frame_stats(b) if b else None,
                    after=frame_stats(a) if a else None,
                )
            )
    rows.sort(key=lambda r: (r.file, r.line_before if r.line_before is not None else r.line_after or 0))
    return rows


@dataclass
class Verification:
    """The before/after comparison of one set of fixes."""

    command: list[str]
    fixes: list[Finding] = field(default_factory=list)
    allows: frozenset[str] = frozenset()  # what the fixes' rules do on purpose (``allowances``)
    frames: list[FrameRow] = field(default_factory=list)
    outputs: list[OutputRow] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # files apply could not fix (stale, unparsable)
    notes: list[str] = field(default_factory=list)
    before_exit: int | None = None
    after_exit: int | None = None
    tolerance: Tolerance = field(default_factory=Tolerance)
    fail_on_recompile: bool = False
    calls: int = DEFAULT_CALLS
    ran: bool = True
    against_recorded: bool = False  # before is the run the Profile recorded (`verify` after `apply`)
    # The run compiled exactly as the one before it (judge.changes_nothing): the fixes change
    # nothing on this program, and are not kept (a regression line says so).
    no_op: bool = False

    @property
    def verified(self) -> bool:
        return not self.regressions

    @property
    def outputs_compared(self) -> int:
        """How many tensor pairs were compared with values to compare: 0 when no compiled callable
        returned a tensor (an optimizer step, an in-place update), or each it returned was NaN
        everywhere in both runs, where "outputs equal" would claim nothing."""
        return sum(o.compared - o.all_nan for o in self.outputs)

    @property
    def outputs_all_nan(self) -> int:
        """Tensor pairs NaN everywhere in both runs (equal, and no evidence)."""
        return sum(o.all_nan for o in self.outputs)

    @property
    def rounded(self) -> bool:
        """Some outputs equal only within the tolerance, not bit for bit."""
        return any(_close(o) for o in self.outputs)

    def total(self, stat: str, side: str):
        return sum(
            row.value(stat, side)
            if stat != "compile_seconds"
            else (getattr(row, side) or {}).get("compile_seconds", 0.0)
            for row in self.frames
        )

    def to_json(self) -> dict:
        return {
            "command": self.command,
            "verified": self.verified,
            "outputs_compared": self.outputs_compared,
            "outputs_all_nan": self.outputs_all_nan,
            "ran": self.ran,
            "against_recorded": self.against_recorded,
            "fixes": [f.to_json() for f in self.fixes],
            "frames": [{**asdict(r), "label": r.label} for r in self.frames],
            "outputs": [asdict(o) for o in self.outputs],
            "totals": {
                s: {"before": self.total(s, "before"), "after": self.total(s, "after")}
                for s in (*STATS, "compile_seconds")
            },
            "regressions": self.regressions,
            "errors": self.errors,
            "notes": self.notes,
            "exit_code": {"before": self.before_exit, "after": self.after_exit},
            "tolerance": {**asdict(self.tolerance), "describe": self.tolerance.describe()},
            "fail_on_recompile": self.fail_on_recompile,
            "calls_recorded": self.calls,
            "no_op": self.no_op,
        }


def _new_frames(v: Verification, rows: list[FrameRow], *, strict: bool = False) -> list[str]:
    """What is worse about frames compiled only after the fix. A new frame that compiles once
    (no recompile, limit hit or graph break) is the price of a fix that removes more than it
    adds: fewer recompiles in all, no more compiles, and the new frames' compile seconds no more
    than the compiles the fix removed took (a tensor lr adds ``Optimizer._to_scalar``, 0.01 s,
    and removes a recompile of ``Adam.step``, about 0.7 s): said in a note. Any other new frame
    is worse. The seconds are weighed frame by frame, not as totals: a busy machine stretches
    every compile of a run alike (1.67 -> 2.21 s in all for that fix, under a parallel test run).
    ``strict`` (an unproven fix is among the fixes): every new frame is worse."""
    worse = []
    totals = {s: (v.total(s, "before"), v.total(s, "after")) for s in ("compiles", "recompiles", "compile_seconds")}
    (c_before, c_after), (r_before, r_after), (s_before, s_after) = totals.values()
    added = sum((row.after or {}).get("compile_seconds", 0.0) for row in rows)
    pays_off = c_after <= c_before and r_after < r_before and added <= _removed_seconds(v.frames) + 0.05
    for row in rows:
        after = row.after or {}
        once = after.get("compiles") == 1 and not any(
            after.get(k) for k in ("recompiles", "limit_hits", "graph_breaks")
        )
        if once and pays_off and not strict:
            v.notes.append(
                f"new compiled frame {row.label} compiles once; in all, compiles {c_before} -> {c_after}, "
                f"recompiles {r_before} -> {r_after}, compile seconds {s_before:.2f} -> {s_after:.2f}"
            )
        else:
            worse.append(f"new compiled frame: {row.label}: {after.get('compiles', 0)} compiles")
    return worse


def _removed_seconds(rows: list[FrameRow]) -> float:
    """The compile seconds of the compiles a fix removed: per frame that compiles fewer times
    after it, the removed compiles at that frame's mean compile time before."""
    removed = 0.0
    for row in rows:
        if row.before is None or row.after is None:
            continue
        fewer = row.before.get("compiles", 0) - row.after.get("compiles", 0)
        if fewer > 0 and row.before.get("compiles"):
            removed += fewer * row.before.get("compile_seconds", 0.0) / row.before["compiles"]
    return removed


def allowances(fixes: list[Finding], rules: tuple[Rule, ...]) -> set[str]:
    """What the rules of these fixes do on purpose (``Rule.verify_allows``)."""
    by_id = {rule.id: rule for rule in rules}
    return {a for f in fixes for a in getattr(by_id.get(f.rule), "verify_allows", ())}


def compare_runs(
    before: Run,
    after: Run,
    *,
    command: list[str],
    fixes: list[Finding],
    tolerance: Tolerance,
    allows: Set[str] = frozenset(),
    each_proven: bool = False,
) -> Verification:
    """``allows``: "graph_breaks", "resume_frames" and/or "regional" (RF007: the whole model's
    frame and callable give way to its blocks'), not counted against the fixes; "same_compiles"
    (RF004: each compile gets cheaper, none goes away): a run that compiles as before is not
    "changes nothing". An unproven fix among ``fixes`` must prove itself (``judge``): fewer
    compiles, outputs compared and equal within its own tolerance, no new frame.
    ``each_proven``: ``fixes`` were each kept by a run that held it to its own tolerance (`fix`'s
    first run against its last): the outputs are compared with ``tolerance``, not the strictest
    any of them asked of its own step (an exact mark beside a 0-d tensor that may round)."""
    unproven = unproven_in(fixes)
    tolerance, strict_why = (tolerance, None) if each_proven else proof_tolerance(fixes, tolerance)
    v = Verification(
        command=list(command),
        fixes=list(fixes),
        allows=frozenset(allows),
        tolerance=tolerance,
        before_exit=before.exit_code,
        after_exit=after.exit_code,
    )
    if strict_why is not None:
        v.notes.append(f"outputs compared {tolerance.describe()}, as {strict_why}")
    if after.exit_code != before.exit_code:
        what = f" ({after.exception})" if after.exception else ""
        v.regressions.append(
            f"the command failed after the fix: exit code {after.exit_code}{what}; its output is in {after.log}"
        )
    v.frames = match_frames(before.profile, after.profile)
    v.outputs = compare_outputs(before.outputs, after.outputs, tolerance)
    new_frames = _judge_frames(v, allows)
    if "regional" in allows and v.total("limit_hits", "after") > v.total("limit_hits", "before"):
        # Blocks that each compile on their own reach the recompile limit and run eagerly.
        v.regressions.append(
            f"more recompile-limit hits: {v.total('limit_hits', 'before')} -> {v.total('limit_hits', 'after')}"
        )
    # An unproven fix adds no frame, unless its rule adds one on purpose that compiles once
    # (RF003's tensor lr: `Optimizer._to_scalar`) and it pays off.
    v.regressions.extend(_new_frames(v, new_frames, strict=bool(unproven) and "frame_once" not in allows))
    _judge_outputs(v, before, after, allows)
    if before.truncated or after.truncated:
        v.notes.append("some outputs were not kept (over 256 MiB in one process): fewer calls compared")
    if not any(o.compared for o in v.outputs):
        v.notes.append("no compiled callable returned a tensor: outputs were not compared")
    if not v.regressions and fixes and after.exit_code == before.exit_code:
        _judge_effect(v, before, after, unproven, allows)
    return v


def _judge_frames(v: Verification, allows: Set[str]) -> list[FrameRow]:
    """Add a regression for each stat a frame got worse in; return the frames compiled only after
    the fixes (``_new_frames`` weighs them)."""
    new_frames = []
    for row in v.frames:
        if is_resume(row.name) and "resume_frames" in allows:
            continue  # the fix splits a frame on purpose: its resume functions compile
        if row.before is None:
            if "regional" in allows:
                v.notes.append(f"compiled after the fix (a block compiled on its own): {row.label}")
                continue
            new_frames.append(row)
            continue
        if row.after is None and "regional" in allows:
            v.notes.append(f"not compiled after the fix (its blocks are compiled instead): {row.label}")
            continue
        if "regional" in allows:
            continue  # frames of the model and of its blocks pair up by name only: judged in total below
        for stat in STATS:
            if stat == "graph_breaks" and "graph_breaks" in allows:
                continue
            b, a = row.value(stat, "before"), row.value(stat, "after")
            if a > b:
                v.regressions.append(f"{_STAT_WORDS[stat]}: {row.label}: {b} -> {a}")
    return new_frames


def _judge_outputs(v: Verification, before: Run, after: Run, allows: Set[str]) -> None:
    """Mark each frame's outputs same or differ, and add a regression for each compiled callable
    whose outputs differ."""
    compiled = {**after.outputs, **before.outputs}
    for row in v.frames:
        # The outputs of the callables compiled as this frame (a function, or a module's forward).
        mine = [o for o in v.outputs if (compiled[o.key].file, compiled[o.key].name) == (row.file, row.name)]
        if mine:
            # "close": within the tolerance, not bit for bit (a safe fix promises the bits).
            row.outputs = (
                "differ" if not all(o.same for o in mine) else "close" if any(_close(o) for o in mine) else "same"
            )
    if v.outputs_all_nan:  # NaN matches NaN: such a pair is no evidence, and the reader is told
        v.notes.append(
            f"{v.outputs_all_nan} of the {v.outputs_compared + v.outputs_all_nan} tensors compared were NaN "
            "everywhere in both runs: equal, but no evidence of the values (the program's numbers are NaN "
            "without the fixes too)"
        )
    if after.exit_code != before.exit_code:  # after a crash, missing outputs say nothing more
        return
    for out in v.outputs:
        one_sided = out.calls_before is None or out.calls_after is None
        if not out.same and one_sided and "regional" in allows:
            note = f"outputs not compared: {out.label}: {out.detail} (RF007 compiles the blocks instead)"
            if note not in v.notes:
                v.notes.append(note)
        elif not out.same:
            v.regressions.append(f"outputs differ: {out.label}: {out.detail}")


# Compile seconds an unproven fix may add before it is a trade-off: margins wide enough for a
# busy machine's stretch of every compile alike (compare ``_new_frames``).
_SLOWER, _SLOWER_SECONDS = 1.5, 2.0


def _close(output: OutputRow) -> bool:
    """Outputs within the tolerance that are not bit for bit the same."""
    return output.same and bool(output.max_abs_diff)


def _judge_effect(v: Verification, before: Run, after: Run, unproven: list[Finding], allows: Set[str]) -> None:
    """Nothing got worse: did the fixes do anything? The same compiles and recompile reasons is
    a fix that changes nothing; an unproven fix must also remove compiles and show equal outputs."""
    c_before, c_after = v.total("compiles", "before"), v.total("compiles", "after")
    if "same_compiles" not in allows and changes_nothing(before.profile, after.profile):
        v.no_op = True
        v.regressions.append(f"{NO_OP}: compiles {c_before} -> {c_after}, the same recompile reasons")
        return
    if not unproven:
        return
    named = ", ".join(f"{f.rule} at {f.file}:{f.location.line}" for f in unproven[:3])
    r_before, r_after = v.total("recompiles", "before"), v.total("recompiles", "after")
    # A new frame compiled once on purpose (RF003: `_to_scalar`) is paid for by a recompile gone.
    traded = "frame_once" in allows and c_after == c_before and r_after < r_before
    if c_after >= c_before and not traded:
        v.regressions.append(f"an unproven fix must remove compiles ({named}): compiles {c_before} -> {c_after}")
    s_before, s_after = v.total("compile_seconds", "before"), v.total("compile_seconds", "after")
    if s_after > s_before * _SLOWER and s_after - s_before > _SLOWER_SECONDS:
        # Fewer compiles of slower kernels (a trial under inductor: `dynamic=True`, two 0-d tensors
        # and a mark, 3 -> 2 compiles, 15.6 -> 31.3 s compiling) is a speed trade-off, not a fix.
        v.regressions.append(
            f"an unproven fix must not lengthen compiling ({named}): compile seconds {s_before:.2f} -> {s_after:.2f}"
        )
    if not v.outputs_compared:
        nothing = (
            f"every tensor compared ({v.outputs_all_nan}: what compiled code returned and what the program "
            "kept) was NaN everywhere in both runs"
            if v.outputs_all_nan
            else "no compiled callable returned a tensor"
        )
        v.regressions.append(f"an unproven fix needs outputs to compare ({named}): {nothing}")
