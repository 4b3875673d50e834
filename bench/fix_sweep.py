"""Issue 30's sweep: `fix` (safe mode) on every program in examples/ and golden/, against what
`apply --unsafe-fixes` reaches, measured the way `verify` measures it.

Per program (eager backend forced, a fresh copy each):

* `fix`: the fixed point of the safe fixes, and of the unproven ones `fix` proves by running
  (``verify.fixpoint.fix_to_fixed_point``, nothing written): compiles first -> last, which
  fixes were kept (and which of them unproven: "verified on this program"), and which were
  dropped and why;
* unsafe: every fix `apply --unsafe-fixes` makes, all at once, run once on a copy and compared
  with `fix`'s first run (as `verify` compares): compiles after, outputs equal or not. (One
  run more per program: `fix`'s first run is the "before" of both.)

A row FAILS when a safe (`[*]`) fix made the program fail, when a safe fix was dropped because
it changes nothing (a `[*]` no-op was offered), or when the unsafe fixes keep the outputs and
reach fewer compiles than `fix` did. The table ends with the counts.

    python bench/fix_sweep.py [--only RF001,examples] [--with-test-programs] [--keep DIR] [--json FILE]

`--with-test-programs` adds the single-file programs of tests/programs (edge, rf001, rf005, seeds,
verify, honest, shapes). A golden case whose model code this interpreter lacks (case.toml's
`requires`, e.g. timm) is named and left out: run it with the torch 2.14.1 lane's python.

Slow (about 4 runs of each of ~70 programs: half an hour on 2 cores); tests/test_fix_sweep.py
runs the same measure on a small sample.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from recompile_fix.errors import Interrupted, UserError  # noqa: E402
from recompile_fix.findings.finding import Safety  # noqa: E402
from recompile_fix.rules import ALL_RULES  # noqa: E402
from recompile_fix.verify.compare import Tolerance, allowances, compare_runs  # noqa: E402
from recompile_fix.verify.fixpoint import fix_to_fixed_point  # noqa: E402
from recompile_fix.verify.judge import NO_OP  # noqa: E402
from recompile_fix.verify.prove import Trials, plan_fixes  # noqa: E402
from recompile_fix.verify.tree import Checkout  # noqa: E402

EXAMPLES = [p for p in sorted((ROOT / "examples").glob("*.py")) if p.name != "run_all.py"]
GOLDEN = sorted(p for p in (ROOT / "golden").glob("RF*/*") if (p / "program.in.py").exists())
TEST_PROGRAMS = sorted(
    p
    for folder in ("edge", "rf001", "rf005", "seeds", "verify", "honest", "shapes")
    for p in (ROOT / "tests" / "programs" / folder).glob("*.py")
)


@dataclass
class Row:
    program: str
    before: int | None = None  # compiles of the program as it is
    fix_after: int | None = None  # compiles after `fix` (safe mode)
    kept: list[str] = field(default_factory=list)
    proven: list[str] = field(default_factory=list)  # unproven fixes `fix` kept: verified on this program
    dropped: list[str] = field(default_factory=list)
    unsafe_after: int | None = None  # compiles with every `apply --unsafe-fixes` fix
    unsafe_outputs: str = ""  # "equal" / "differ" / "failed" / "none" (no fix) / "not compared"
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


def stage(program: Path, work: Path) -> tuple[Path, list[str]]:
    """The program in a project of its own, and the command that runs it."""
    work.mkdir(parents=True)
    if program.is_dir():  # a golden case, staged as tests/test_golden.py stages it
        shutil.copy(program / "program.in.py", work / "program.py")
        for extra in program.glob("*.py"):
            if extra.name not in ("program.in.py", "program.out.py"):
                shutil.copy(extra, work / extra.name)
        for package in program.glob("*/__init__.py"):
            shutil.copytree(package.parent, work / package.parent.name, ignore=shutil.ignore_patterns("__pycache__"))
        return work, [sys.executable, "program.py"]
    (work / program.parent.name).mkdir()
    shutil.copy(program, work / program.parent.name / program.name)
    return work, [sys.executable, f"{program.parent.name}/{program.name}"]


def missing_packages(program: Path) -> list[str]:
    """The packages a golden case requires (its case.toml) that this interpreter cannot import."""
    spec = program / "case.toml"
    if not spec.exists():
        return []
    required = tomllib.loads(spec.read_text(encoding="utf-8")).get("requires", [])
    return [name for name in required if importlib.util.find_spec(name) is None]


def measure(program: Path, scratch: Path) -> Row:
    name = f"{program.parent.name}/{program.name}"
    row = Row(name)
    started = time.monotonic()
    work, command = stage(program, scratch / name.replace("/", "-"))
    try:
        result = fix_to_fixed_point(command, ALL_RULES, root=work, backend="eager", write=False)
    except UserError as exc:
        if "failed on your tree as it is" in str(exc):  # tests/programs/edge: it exits non-zero by design
            row.unsafe_outputs = "n/a: the program fails as it is (nothing to verify against)"
        else:
            row.failures.append(f"fix: {exc}")
        return row
    row.before = sum(f.compile_count for f in result.first.profile.frames)
    row.fix_after = sum(f.compile_count for f in result.last.profile.frames)
    for finding in result.kept:
        where = f"{finding.rule}@{finding.location.line}"
        (row.proven if finding.unproven else row.kept).append(where)
    for finding, why in result.dropped:
        first = why[0] if why else "?"
        row.dropped.append(f"{finding.rule}@{finding.location.line}: {first[:90]}")
        if finding.safety is Safety.SAFE and first.startswith("the command failed"):
            row.failures.append(f"a [*] fix made the program fail: {finding.rule} at line {finding.location.line}")
        if finding.safety is Safety.SAFE and first.startswith(NO_OP):
            row.failures.append(f"a [*] fix changes nothing: {finding.rule} at line {finding.location.line}")
    # The unsafe fixes, all at once, against the same first run.
    user = Checkout.of(work, result.first.profile)
    with tempfile.TemporaryDirectory(prefix="fix-sweep-") as tmp:
        snapshot = user.copy_to(Path(tmp) / "snapshot")
        fixes, _ = plan_fixes(snapshot.cwd, result.first.profile, ALL_RULES, unsafe_fixes=True)
        if not fixes:
            row.unsafe_after, row.unsafe_outputs = row.before, "none"
        else:
            trials = Trials(command, snapshot, user, ALL_RULES, Path(tmp), backend="eager", calls=3, progress=None)
            run = trials(fixes, "with every fix, unsafe ones included")
            v = compare_runs(
                result.first,
                run,
                command=command,
                fixes=fixes,
                tolerance=Tolerance(),
                allows=allowances(fixes, ALL_RULES),
            )
            row.unsafe_after = sum(f.compile_count for f in run.profile.frames)
            if run.exit_code != result.first.exit_code:
                row.unsafe_outputs = "failed"
            elif not v.outputs_compared:
                row.unsafe_outputs = "not compared"
            else:
                row.unsafe_outputs = "equal" if all(o.same for o in v.outputs) else "differ"
    if row.unsafe_outputs == "equal" and row.unsafe_after is not None and row.fix_after is not None:
        if row.unsafe_after < row.fix_after:
            row.failures.append(
                f"--unsafe-fixes reaches {row.unsafe_after} compiles with equal outputs, fix {row.fix_after}"
            )
    row.seconds = round(time.monotonic() - started, 1)
    return row


def table(rows: list[Row]) -> str:
    header = ("program", "before", "fix", "unsafe", "unsafe outputs", "kept", "proven", "dropped", "verdict")
    cells = [
        (
            r.program,
            str(r.before),
            str(r.fix_after),
            str(r.unsafe_after),
            r.unsafe_outputs,
            str(len(r.kept)),
            str(len(r.proven)),
            str(len(r.dropped)),
            "ok" if r.ok else "FAIL: " + "; ".join(r.failures),
        )
        for r in rows
    ]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(header[:-1])]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header[:-1], widths)) + "  verdict"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell[:-1], widths)) + "  " + cell[-1] for cell in cells]
    failed = sum(1 for r in rows if not r.ok)
    reached = sum(
        1 for r in rows if r.fix_after is not None and r.unsafe_after is not None and r.fix_after <= r.unsafe_after
    )
    lines.append(
        f"{len(rows)} programs: {len(rows) - failed} ok, {failed} FAIL; `fix` reaches the unsafe count on {reached}; "
        f"{sum(len(r.proven) for r in rows)} unproven fixes verified on their program"
    )
    return "\n".join(lines)


def programs(only: str | None, with_test_programs: bool = False) -> list[Path]:
    chosen = [*EXAMPLES, *GOLDEN, *(TEST_PROGRAMS if with_test_programs else [])]
    if not only:
        return chosen
    wanted = only.split(",")
    return [p for p in chosen if any(w in str(p.relative_to(ROOT)) for w in wanted)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated parts of paths: RF001,examples/ragged")
    parser.add_argument("--with-test-programs", action="store_true", help="also tests/programs' single-file programs")
    parser.add_argument("--keep", help="keep the staged projects here")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fix-sweep-") as tmp:
        scratch = Path(args.keep) if args.keep else Path(tmp)
        for program in programs(args.only, args.with_test_programs):
            missing = missing_packages(program)
            if missing:
                print(
                    f"{program.relative_to(ROOT)}: not run here: needs {', '.join(missing)} (the torch 2.14.1 lane's python)"
                )
                continue
            try:
                row = measure(program, scratch)
            except Interrupted:
                raise  # stopped (Ctrl-C, SIGTERM): the rows so far are in --json
            except Exception as exc:  # noqa: BLE001 - one program's crash is its row, not the sweep's end
                row = Row(str(program.relative_to(ROOT)), failures=[f"sweep error: {exc!r}"])
            rows.append(row)
            if args.json:  # as it goes: a sweep stopped half way keeps its rows
                Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
            print(f"{row.program}: {row.before} -> fix {row.fix_after}, unsafe {row.unsafe_after} "
                  f"({row.unsafe_outputs}) {'ok' if row.ok else 'FAIL'} [{row.seconds}s]", flush=True)  # fmt: skip
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    return 1 if any(not r.ok for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
