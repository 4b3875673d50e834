"""The scalar analysis, grounded in what torch does: for each construct a Python number meets in
compiled code (tests/programs/constructs/table.py), what the analysis allows (a safe wrap, an
unsafe one, or none) and what torch 2.13 measurably does with the number and with a 0-d tensor
(compiles, graph breaks, outputs against the original run eagerly).

The quick test pins the analysis' verdicts. The slow one checks each verdict against what torch
did when every construct ran under it (measure.py; recorded per torch release in
constructs/measured/, measured live on a release not recorded there):

* allowed (safe): under dynamic=None and dynamic=False the tensor compiles no more often than
  the number, breaks no graph, and the outputs are bit-identical;
* allowed (unsafe): the same, but the outputs may be only close;
* blocked: the tensor breaks a graph, fails, changes the outputs, or gains nothing (at least as
  many compiles as the number under dynamic=None), in at least one of the runs recorded.

On torch 2.13 it also checks every cell against the numbers recorded here (the closing note's
construct table), so a torch upgrade that changes a verdict shows up as a diff of this file.
"""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
import torch

from conftest import PROGRAMS, require_slow
from recompile_fix.analysis.scalar_uses import BLOCKS, TENSOR, UNKNOWN, ScalarUses
from recompile_fix.analysis.source import SourceFile
from recompile_fix.rules.rf002_tensor_scalar.rule import _NO_DTYPE, _dtype

_spec = importlib.util.spec_from_file_location("construct_table", PROGRAMS / "constructs" / "table.py")
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)

# What the analysis allows for each construct (RF002's verdict: the wrap it writes, or why not).
ALLOWED_SAFE = {
    "max_const",
    "max_const_first",
    "min_const",
    "abs",
    "sum_list",
    "pair_list",
    "optional",
    "bool_as_number",
    "where_tensor_cmp",
    "where_scalar_cmp",
    "div",
    "gumbel_tau",
    "scalar_math",
    "clamp",
    "clamp_method",
    "eps_arith",
    "lerp",
    "full",
    "masked_fill",
    "fill",
    "leaky_relu",
    "softplus",
    "long_tensor",
    "int_mul",
    "int_floordiv",
}
# Outputs close, not bit-identical: torch divides a Python number by a tensor as
# `reciprocal(x) * c`, a 0-d tensor by a true division.
ALLOWED_UNSAFE = {"power", "rdiv"}

# construct -> (the 0-d tensor's dtype measured, what torch 2.13 did). Each cell is
# "number compiles -> tensor compiles [graph breaks] outputs" under dynamic=None; dynamic=False.
# Blocked constructs are measured with the wrap RF002 would otherwise write (float64 / int64).
RECORDED = {
    "max_const": "2c -> 1c exact; 4c -> 1c exact",
    "max_const_first": "2c -> 1c exact; 4c -> 1c exact",
    "min_const": "2c -> 1c exact; 4c -> 1c exact",
    "abs": "2c -> 1c exact; 4c -> 1c exact",
    "sum_list": "2c -> 1c exact; 4c -> 1c exact",
    "pair_list": "2c -> 1c exact; 4c -> 1c exact",
    "round": "2c -> 1c 1gb TypeError; 4c -> 1c 1gb TypeError",
    "float_conv": "2c -> 3c 1gb exact; 4c -> 5c 1gb exact",
    "int_conv": "2c -> 3c 1gb exact; 4c -> 4c 1gb exact",
    "builtin_pow": "2c -> 2c 1gb exact; 4c -> 2c 1gb exact",
    "math_sqrt": "2c -> 4c exact; 4c -> 4c exact",
    "math_exp": "4c -> 3c 1gb exact; 4c -> 5c 1gb exact",
    "optional": "2c -> 2c exact; 2c -> 2c exact",
    "bool_as_number": "2c -> 1c exact; 4c -> 1c exact",
    "where_tensor_cmp": "2c -> 1c exact; 4c -> 1c exact",
    "where_scalar_cmp": "the original fails eagerly -> 1c exact; the original fails eagerly -> 1c exact",
    "branch_eq": "3c -> 3c 1gb exact; 2c -> 3c 1gb exact",
    "ifexp": "3c -> 3c 1gb exact; 4c -> 3c 1gb exact",
    "truthiness": "2c -> 2c 1gb exact; 4c -> 2c 1gb exact",
    "div": "2c -> 1c exact; 4c -> 1c exact",
    "scalar_math": "2c -> 1c exact; 4c -> 1c exact",
    "power": "2c -> 1c close; 4c -> 1c close",
    "rdiv": "2c -> 1c close; 4c -> 1c close",
    "gumbel_tau": "2c -> 1c exact; 4c -> 1c exact",
    "clamp": "2c -> 1c exact; 4c -> 1c exact",
    "clamp_method": "2c -> 1c exact; 4c -> 1c exact",
    "eps_arith": "2c -> 1c exact; 4c -> 1c exact",
    "lerp": "2c -> 1c exact; 4c -> 1c exact",
    "full": "2c -> 1c exact; 4c -> 1c exact",
    "masked_fill": "2c -> 1c exact; 4c -> 1c exact",
    "fill": "2c -> 1c exact; 4c -> 1c exact",
    "full_like": "2c -> 1c exact; 4c -> 1c exact",
    "new_full": "2c -> 1c exact; 4c -> 1c exact",
    "leaky_relu": "2c -> 1c exact; 4c -> 1c exact",
    "softplus": "2c -> 1c exact; 4c -> 1c exact",
    "hardtanh": "2c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "dropout": "4c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "layer_norm_eps": "4c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "label_smoothing": "4c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "as_tensor": "4c -> 1c DIFF; 4c -> 1c DIFF",
    "long_tensor": "2c -> 1c exact; 4c -> 1c exact",
    "returned": "2c -> 1c DIFF; 4c -> 1c DIFF",
    "int_mul": "2c -> 1c exact; 4c -> 1c exact",
    "int_floordiv": "2c -> 1c exact; 4c -> 1c exact",
    "int_int_conv": "2c -> 3c 1gb exact; 4c -> 5c 1gb exact",
    "int_range": "4c -> 3c 2gb exact; 4c -> 5c 1gb exact",
    "int_branch": "3c -> 3c 1gb exact; 4c -> 3c 1gb exact",
    "int_view": "4c -> 4c exact; 5c -> 4c exact",
    "int_slice": "3c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "int_index": "4c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "int_zeros": "2c -> 1c exact; 4c -> 1c exact",
    "int_repeat": "2c -> 1c exact; 4c -> 1c exact",
    "int_topk": "2c -> 1c exact; 4c -> 1c exact",
    "int_sum_dim": "2c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "int_one_hot": "4c -> 1c 1gb exact; 4c -> 1c 1gb exact",
}
# Runs that decide a verdict the eager backend cannot show (dynamic=None): inductor returns the
# first call's fill forever (full_like, new_full); int sizes from a 0-d tensor graph-break there.
# Measured with a cold inductor cache, as on a fresh clone: with a warm one, full_like and new_full
# compile once where a cold cache compiles twice (the outputs differ either way).
RECORDED_INDUCTOR = {
    "full_like": "4c -> 2c DIFF",
    "new_full": "4c -> 2c DIFF",
    "int_topk": "2c -> 1c 1gb exact",
    "int_repeat": "2c -> 1c 1gb exact",
    "int_zeros": "2c -> 1c 1gb exact",
    "lerp": "4c close -> 1c close",
}
# A float32 0-d tensor where torch takes only float64 (why the analysis insists on float64).
RECORDED_FLOAT32 = {
    "leaky_relu": "2c -> 1c 1gb exact; 4c -> 1c 1gb exact",
    "softplus": "2c -> 1c 1gb exact; 4c -> 1c 1gb exact",
}
X = {"x": {"type": "Tensor", "shape": [4, 8], "dtype": "float32"}}


def verdict(name: str) -> tuple[str, str | None]:
    """("safe" / "unsafe" / "blocked", the 0-d tensor's dtype RF002 writes or would write)."""
    source = SourceFile.parse(
        Path("constructs.py"),
        "import math\nimport torch\nimport torch.nn.functional as F\n\n\n" + table.source_of(name),
    )
    func = next(n for n in source.nodes(cst.FunctionDef))
    uses = ScalarUses().of_parameter(source, "constructs.py", func, "c", {"x"})
    kind = "int" if table.CONSTRUCTS[name].kind in ("int", "size") else "float"
    naive = "int64" if kind == "int" else "float64"
    if any(u.verdict == BLOCKS for u in uses) or not any(u.verdict in (TENSOR, UNKNOWN) for u in uses):
        return "blocked", naive
    dtype, exact, _ = _dtype(kind, [u for u in uses if u.verdict == TENSOR], X)
    if dtype == _NO_DTYPE:
        return "blocked", naive
    chosen = "int64" if kind == "int" else (dtype or str(torch.get_default_dtype()).replace("torch.", ""))
    return ("safe" if exact and not any(u.verdict == UNKNOWN for u in uses) else "unsafe"), chosen


@pytest.mark.parametrize("name", sorted(table.CONSTRUCTS))
def test_analysis_verdict(name):
    expected = "safe" if name in ALLOWED_SAFE else "unsafe" if name in ALLOWED_UNSAFE else "blocked"
    assert verdict(name)[0] == expected


def test_every_construct_has_a_recorded_measurement():
    assert set(RECORDED) == set(table.CONSTRUCTS)
    assert set(RECORDED_INDUCTOR) <= set(table.CONSTRUCTS) and set(RECORDED_FLOAT32) <= set(table.CONSTRUCTS)


def _cell(run: dict) -> str:
    number, tensor = run["number"], run["tensor"]

    def side(r: dict) -> str:
        if r["compiles"] is None:
            return r["outputs"]
        gb = f" {r['graph_breaks']}gb" if r["graph_breaks"] else ""
        outputs = r["outputs"].split(":", 1)[0]
        return f"{r['compiles']}c{gb} {outputs}"

    left = side(number)
    if number["outputs"] == "exact":
        left = left.rsplit(" ", 1)[0]  # the number's own run: only its compiles matter
    if "fails eagerly" in str(number.get("outputs")):
        left = "the original fails eagerly"
    return f"{left} -> {side(tensor)}"


# The measurement, recorded: what measure.py printed for these specs on a torch release, with a
# digest of what decides it (table.py, measure.py, the specs). A release recorded here is read
# from its file, any other measured live; `pytest --update-golden` measures again and records it
# (a cold inductor cache, as on a fresh clone). test_the_records_are_of_this_table fails when
# table.py or measure.py changed since, so a record is never older than the table it measures.
MEASURED = PROGRAMS / "constructs" / "measured"


def _specs() -> list[str]:
    specs = [f"{name}:{verdict(name)[1]}:eager" for name in table.CONSTRUCTS]
    specs += [f"{name}:{verdict(name)[1]}:inductor:None" for name in RECORDED_INDUCTOR]
    return specs + [f"{name}:float32:eager" for name in RECORDED_FLOAT32]


def _digest(specs: list[str]) -> str:
    data = b"".join((PROGRAMS / "constructs" / f).read_bytes() for f in ("table.py", "measure.py"))
    return hashlib.sha256(data + "\n".join(specs).encode()).hexdigest()


def _record_of(release: str) -> Path:
    return MEASURED / f"torch-{release.split('+')[0]}.json"


def _measure(specs: list[str], tmp_path_factory) -> dict:
    require_slow("the construct table")
    out = tmp_path_factory.mktemp("constructs") / "measured.json"
    cold_cache = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path_factory.mktemp("inductor-cache"))}
    done = subprocess.run(
        [sys.executable, str(PROGRAMS / "constructs" / "measure.py"), str(out), *specs],
        capture_output=True,
        text=True,
        env=cold_cache,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def measured(tmp_path_factory, request):
    specs, record = _specs(), _record_of(torch.__version__)
    if not request.config.getoption("--update-golden") and record.is_file():
        kept = json.loads(record.read_text())
        if kept["digest"] == _digest(specs):
            return kept["measured"]
    result = _measure(specs, tmp_path_factory)
    if request.config.getoption("--update-golden"):
        record.parent.mkdir(exist_ok=True)
        text = json.dumps({"torch": torch.__version__, "digest": _digest(specs), "measured": result}, indent=1)
        record.write_text(text + "\n")
    return result


@pytest.mark.parametrize("record", sorted(p.name for p in MEASURED.glob("torch-*.json")))
def test_the_records_are_of_this_table(record):
    """A recorded measurement is of the table and the measuring code as they are now."""
    kept = json.loads((MEASURED / record).read_text())
    assert kept["digest"] == _digest(_specs()), (
        f"tests/programs/constructs changed since {record} was measured: measure again with "
        "`pytest tests/test_construct_table.py --update-golden` on that torch release"
    )
    assert set(kept["measured"]) == set(_specs())


def _as_measured_here(recorded: str, measured: str) -> str:
    """A recorded "close" cell also matches "exact": whether a close result is bit-identical too
    depends on the CPU's kernels (`power` was close on the machine that recorded the table, is exact on an AVX-512 one)."""
    return measured if recorded.replace("close", "exact") == measured else recorded


def _runs(measured: dict, name: str) -> list[dict]:
    return [run for spec, modes in measured.items() if spec.split(":")[0] == name for run in modes.values()]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(table.CONSTRUCTS))
def test_verdict_follows_the_measurement(measured, name):
    allowed, dtype = verdict(name)
    own = measured[f"{name}:{dtype}:eager"]
    if allowed in ("safe", "unsafe"):
        for mode, run in own.items():
            number, tensor = run["number"], run["tensor"]
            assert tensor["graph_breaks"] == 0, (mode, run)
            assert number["compiles"] is None or tensor["compiles"] <= number["compiles"], (mode, run)
            assert tensor["outputs"] in (("exact",) if allowed == "safe" else ("exact", "close")), (mode, run)
        inductor = measured.get(f"{name}:{dtype}:inductor:None")
        if inductor is not None:  # as good as the number compiled the same way
            run = inductor["None"]
            assert run["tensor"]["graph_breaks"] == 0 and run["tensor"]["compiles"] <= run["number"]["compiles"]
            assert run["tensor"]["outputs"] == run["number"]["outputs"] or run["tensor"]["outputs"] == "exact"
    else:
        harmful = [
            run
            for run in _runs(measured, name)
            if run["tensor"]["graph_breaks"]
            or run["tensor"]["outputs"] not in ("exact", "close")
            or (run["number"]["compiles"] is not None and run["tensor"]["compiles"] >= run["number"]["compiles"])
        ]
        assert harmful, f"{name} is blocked, but a 0-d tensor was measured no worse: {_runs(measured, name)}"


@pytest.mark.slow
@pytest.mark.skipif(not torch.__version__.startswith("2.13."), reason="the numbers recorded are torch 2.13's")
def test_recorded_numbers(measured):
    got = {}
    for name in table.CONSTRUCTS:
        modes = measured[f"{name}:{verdict(name)[1]}:eager"]
        got[name] = "; ".join(_cell(modes[m]) for m in ("None", "False"))
    assert got == {name: _as_measured_here(RECORDED[name], got.get(name, "")) for name in RECORDED}
    inductor = {name: _cell(measured[f"{name}:{verdict(name)[1]}:inductor:None"]["None"]) for name in RECORDED_INDUCTOR}
    assert inductor == RECORDED_INDUCTOR
    float32 = {
        name: "; ".join(_cell(run) for run in measured[f"{name}:float32:eager"].values()) for name in RECORDED_FLOAT32
    }
    assert float32 == RECORDED_FLOAT32
