"""recompile-fix's first run against PyTorch's own profile-guided dynamism (PGO) on its second.

torch 2.13's PGO (`torch/_dynamo/pgo.py`) records which sizes, ints and floats varied in a run
and marks them dynamic in the next process that shares `TORCH_COMPILE_JOB_ID` and a cache dir.
For each recompile class (`bench/pgo_programs.py`: the 13 rows of the anchors matrix plus the
classes projects hand-fix) this measures, in fresh processes, the eager backend forced:

* run 1: the program as written, first of two processes sharing a job id and a cache dir (PGO
  reads nothing on it, so it is also the plain run);
* PGO run 2: the second of those processes;
* safe: one run (no job id, a fresh cache dir) after `recompile-fix profile --backend eager` and
  `recompile-fix apply .`; unsafe: the same with `apply --unsafe-fixes`;
* fix: one run after `recompile-fix fix --backend eager` (no `--unsafe-fixes`: the safe fixes and
  the unproven ones a run of the program proves, outputs bit for bit), on the rows where the
  safe run compiles more than PGO's run 2 or more than the unsafe run ("-" elsewhere).

Compiles and recompile-limit hits are torch's compilation metrics (`bench/pgo_run.py`); each
run's `outputs` (same seed) are compared with run 1's by `torch.testing.assert_close`. A row
is beaten when the safe run (or the fix run, where it compiles less) compiles no more than PGO's run 2, hits no limit, gives the same
tensors, and compiles fewer times than PGO's run 2 where PGO removed nothing.

    python bench/pgo_matrix.py [--rows shapes,kwargs_keys] [--jobs 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from pgo_programs import PROGRAMS, BenchProgram  # noqa: E402

RUNNER = BENCH / "pgo_run.py"
PROGRAM = "program.py"


@dataclass
class Run:
    compiles: int | None = None  # None: the run failed
    limit_hits: int = 0
    outputs: str = "-"  # "same", "DIFFER", "-" (not compared), "FAILED"
    error: str = ""

    def cell(self) -> str:
        if self.compiles is None:
            return "FAILED"
        return f"{self.compiles}" + (f" ({self.limit_hits} limit)" if self.limit_hits else "")


@dataclass
class Row:
    program: BenchProgram
    run1: Run = field(default_factory=Run)
    pgo2: Run = field(default_factory=Run)
    safe: Run = field(default_factory=Run)
    unsafe: Run = field(default_factory=Run)
    fixed: Run | None = None  # None: not measured (the safe run did as well as PGO and --unsafe-fixes)
    safe_rules: str = ""
    unsafe_rules: str = ""
    seconds: float = 0.0

    def verdict(self) -> str:
        """beats: fewer compiles than PGO's run 2; ties: as few, where PGO fixed it too; no fix:
        as many, where PGO removed nothing either (the row is not beaten); behind: more, or a
        limit hit; WRONG: other tensors. Judged on the safe run, or on the fix run where that
        compiles less with the same tensors."""
        safe, pgo = self.best, self.pgo2
        if safe.compiles is None or pgo.compiles is None or self.run1.compiles is None:
            return "error"
        if safe.outputs == "DIFFER":
            return "WRONG"
        if safe.limit_hits or safe.compiles > pgo.compiles:
            return "behind"
        if safe.compiles < pgo.compiles:
            return "beats"
        return "ties" if pgo.compiles < self.run1.compiles or safe.compiles <= 1 else "no fix"

    @property
    def best(self) -> Run:
        fixed = self.fixed
        if fixed is None or fixed.compiles is None or fixed.outputs == "DIFFER":
            return self.safe
        return fixed if self.safe.compiles is None or fixed.compiles < self.safe.compiles else self.safe


def clean_env(cache_dir: str, job_id: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_COMPILE_", "TORCHINDUCTOR_"))}
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["RECOMPILE_FIX_PROGRESS"] = "0"
    env.pop("TORCH_LOGS", None)
    if job_id:
        env["TORCH_COMPILE_JOB_ID"] = job_id
    return env


def run_program(workdir: Path, tag: str, env: dict[str, str], reference: Path | None) -> tuple[Run, Path]:
    counts, outputs = workdir.parent / f"{tag}.json", workdir.parent / f"{tag}.pt"
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(counts), str(outputs), PROGRAM],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return Run(error=(done.stderr.strip().splitlines() or ["?"])[-1]), outputs
    data = json.loads(counts.read_text())
    run = Run(compiles=data["compiles"], limit_hits=data["limit_hits"])
    if reference is not None:
        run.outputs = compare(reference, outputs)
    return run, outputs


def compare(expected_path: Path, actual_path: Path) -> str:
    import torch

    expected, actual = torch.load(expected_path), torch.load(actual_path)
    if len(expected) != len(actual):
        return "DIFFER"
    try:
        for want, got in zip(expected, actual):
            torch.testing.assert_close(got, want)
    except AssertionError:
        return "DIFFER"
    return "same"


def tool(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recompile_fix", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def fixed_rules(workdir: Path, env: dict[str, str], unsafe: bool) -> str:
    """The rules whose fixes `apply` would write, as `apply --output-format json` lists them."""
    flags = ["--unsafe-fixes"] if unsafe else []
    listed = tool(["apply", ".", "--check", "--exit-zero", "--output-format", "json", *flags], workdir, env)
    try:
        findings = json.loads(listed.stdout or "[]")
    except json.JSONDecodeError:
        return "?"
    wanted = {"safe"} | ({"unsafe"} if unsafe else set())
    ids = sorted({f["code"] for f in findings if f.get("fix") and f["fix"].get("applicability") in wanted})
    return ",".join(ids) or "-"


def measure(program: BenchProgram, scratch: Path) -> Row:
    started = time.perf_counter()
    row = Row(program)
    base = scratch / program.name
    source_dir = base / "pgo" / "src"
    source_dir.mkdir(parents=True)
    (source_dir / PROGRAM).write_text(program.source)
    pgo_env = clean_env(str(base / "pgo" / "cache"), job_id=f"pgo-matrix-{program.name}")
    row.run1, reference = run_program(source_dir, "run1", pgo_env, None)
    row.pgo2, _ = run_program(source_dir, "pgo2", pgo_env, reference if row.run1.compiles is not None else None)

    tool_dir = base / "tool" / "src"
    tool_dir.mkdir(parents=True)
    (tool_dir / PROGRAM).write_text(program.source)
    (tool_dir / "pyproject.toml").write_text('[project]\nname = "bench-program"\nversion = "0"\n')
    profile_env = clean_env(str(base / "tool" / "cache"))
    profiled = tool(["profile", "--backend", "eager", "--", sys.executable, PROGRAM], tool_dir, profile_env)
    if profiled.returncode != 0:
        row.safe = row.unsafe = Run(error=(profiled.stderr.strip().splitlines() or ["profile failed"])[-1])
        row.seconds = time.perf_counter() - started
        return row
    for variant in ("safe", "unsafe"):
        variant_dir = base / variant / "src"
        shutil.copytree(tool_dir, variant_dir)
        env = clean_env(str(base / variant / "cache"))
        unsafe = variant == "unsafe"
        rules = fixed_rules(variant_dir, env, unsafe)
        tool(["apply", ".", "--exit-zero", *(["--unsafe-fixes"] if unsafe else [])], variant_dir, env)
        if unsafe and (variant_dir / PROGRAM).read_text() == (base / "safe" / "src" / PROGRAM).read_text():
            row.unsafe, row.unsafe_rules = row.safe, row.safe_rules  # the same source: the same run
            continue
        run, _ = run_program(variant_dir, variant, env, reference if row.run1.compiles is not None else None)
        if variant == "safe":
            row.safe, row.safe_rules = run, rules
        else:
            row.unsafe, row.unsafe_rules = run, rules
    safe, pgo, unsafe = row.safe.compiles, row.pgo2.compiles, row.unsafe.compiles
    if safe is not None and pgo is not None and (safe > pgo or (unsafe is not None and unsafe < safe)):
        fix_dir = base / "fix" / "src"
        fix_dir.mkdir(parents=True)
        (fix_dir / PROGRAM).write_text(program.source)
        shutil.copy(tool_dir / "pyproject.toml", fix_dir / "pyproject.toml")
        env = clean_env(str(base / "fix" / "cache"))
        tool(["fix", "--backend", "eager", "--", sys.executable, PROGRAM], fix_dir, env)
        row.fixed, _ = run_program(fix_dir, "fix", env, reference if row.run1.compiles is not None else None)
    row.seconds = time.perf_counter() - started
    return row


def table(rows: list[Row]) -> str:
    header = [
        "recompile class",
        "run 1",
        "PGO run 2",
        "safe",
        "unsafe",
        "fix",
        "best/PGO",
        "outputs",
        "rules",
        "verdict",
    ]
    lines = []
    for row in rows:
        ratio = "-"
        if row.best.compiles is not None and row.pgo2.compiles:
            ratio = f"{row.best.compiles / row.pgo2.compiles:.2f}"
        outputs = "/".join(run.outputs for run in (row.pgo2, row.safe, row.unsafe, *([row.fixed] if row.fixed else [])))
        rules = row.safe_rules + (f" (+{row.unsafe_rules})" if row.unsafe_rules != row.safe_rules else "")
        fixed = row.fixed.cell() if row.fixed is not None else "-"
        cells = [row.program.title, row.run1.cell(), row.pgo2.cell(), row.safe.cell(), row.unsafe.cell(), fixed]
        lines.append([*cells, ratio, outputs, rules, row.verdict()])
    widths = [max(len(str(c)) for c in column) for column in zip(header, *lines)]
    out = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |"]
    out.append("| " + " | ".join("-" * w for w in widths) + " |")
    out += ["| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths)) + " |" for line in lines]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", help="comma-separated row names (default: all): " + ",".join(p.name for p in PROGRAMS)
    )
    parser.add_argument("--jobs", type=int, default=1, help="rows measured at once (default 1)")
    parser.add_argument("--keep", help="measure in DIR and keep it (default: a temporary directory)")
    args = parser.parse_args()
    programs = list(PROGRAMS)
    if args.rows:
        wanted = args.rows.split(",")
        unknown = sorted(set(wanted) - {p.name for p in PROGRAMS})
        if unknown:
            parser.error(f"unknown rows: {', '.join(unknown)}")
        programs = [p for p in PROGRAMS if p.name in wanted]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pgo-matrix-") as tmp:
        scratch = Path(args.keep) if args.keep else Path(tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(lambda p: measure(p, scratch), programs))
    import torch

    print(f"torch {torch.__version__}, eager backend, compiles from torch's compilation metrics")
    print("PGO: two fresh processes sharing one TORCH_COMPILE_JOB_ID and cache dir")
    print("outputs: PGO run 2 / safe / unsafe (/ fix) against run 1 (same seed, torch.testing.assert_close)\n")
    print(table(rows))
    for row in rows:
        for name in ("run1", "pgo2", "safe", "unsafe", "fixed"):
            run = getattr(row, name)
            if run is not None and run.error:
                print(f"{row.program.name} {name}: {run.error}")
    verdicts = [row.verdict() for row in rows]
    at_or_below = sum(v in ("beats", "ties", "no fix") for v in verdicts)
    print(
        f"\nat or below PGO's run 2 with same outputs and no limit hit: {at_or_below}/{len(rows)} rows; "
        f"below it on {verdicts.count('beats')}; {verdicts.count('no fix')} where neither removes a compile"
    )
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
