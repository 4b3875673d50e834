"""Measure what torch does with each construct of tests/programs/constructs/table.py when its
scalar is a Python number and when it is a 0-d tensor (the wrap RF002 would write): compiles
(torch's own compilation metrics), graph breaks (every break goes through dynamo's
``log_graph_break`` once per compile; ``counters["graph_break"]`` misses data-dependent branches)
and the outputs against the original run eagerly with the Python number.

usage: measure.py OUT.json NAME:DTYPE:BACKEND[:MODE] [...]
    DTYPE: float64 / float32 / int64 (the 0-d tensor's dtype); BACKEND: eager / inductor;
    MODE: None or False, the ``dynamic=`` to run (default: both)
"""

import json
import math  # noqa: F401 -- the constructs use it
import sys
from pathlib import Path

import torch
import torch._dynamo
import torch._dynamo.utils as dynamo_utils
import torch.nn.functional as F  # noqa: F401 -- the constructs use it

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table import CONSTRUCTS, VALUES, source_of  # noqa: E402

torch.set_num_threads(1)
dynamo_utils.set_compilation_metrics_limit(100_000)

_BREAKS: list[str] = []
_translator = torch._dynamo.symbolic_convert.InstructionTranslatorBase
_log_graph_break = _translator.log_graph_break


def _counting(self, code_options, reason, exc):
    if not getattr(exc, "logged", False):
        _BREAKS.append(str(getattr(exc, "msg", None) or reason).split("\n", 1)[0][:160])
    return _log_graph_break(self, code_options, reason, exc)


_translator.log_graph_break = _counting


def _reset() -> None:
    torch._dynamo.reset()
    dynamo_utils.clear_compilation_metrics()
    dynamo_utils.counters.clear()
    _BREAKS.clear()


def _compiles() -> int:
    return sum(
        1
        for m in dynamo_utils.get_compilation_metrics()
        if m.is_forward is not False and not (m.fail_reason and "recompile limit" in m.fail_reason)
    )


def _compare(got, want) -> str:
    """exact / close / DIFF (values or dtype)."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    verdict = "exact"
    for g, w in zip(got, want):
        if not isinstance(w, torch.Tensor) or not isinstance(g, torch.Tensor):
            if isinstance(w, torch.Tensor) or isinstance(g, torch.Tensor) or g != w:
                return "DIFF"  # a number became a tensor (or the other way), or a different number
            continue
        if g.dtype != w.dtype or g.shape != w.shape:
            return "DIFF"
        if torch.equal(g, w):
            continue
        try:
            torch.testing.assert_close(g, w)
            verdict = "close"
        except AssertionError:
            return "DIFF"
    return verdict


def measure(name: str, dtype: str, backend: str, dynamic) -> dict:
    construct = CONSTRUCTS[name]
    namespace: dict = {}
    exec(source_of(name), globals() | namespace, namespace)  # noqa: S102 -- our own table
    fn = namespace["f"]
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    values = VALUES[construct.kind]

    def wrap(v):
        return torch.tensor(v, dtype=getattr(torch, dtype)) if v is not None else v

    def eager(v):
        torch.manual_seed(1)  # random ops (dropout) draw the same numbers in every run
        return fn(x.clone(), v)

    # The reference: the original run eagerly with the number (or, where that fails even eagerly,
    # with the 0-d tensor).
    wanted = [eager(v if construct.original_runs else wrap(v)) for v in values]
    result: dict = {}
    for wrapped in (False, True):
        if not wrapped and not construct.original_runs:
            result["number"] = {"compiles": None, "graph_breaks": None, "outputs": "the original fails eagerly"}
            continue
        _reset()
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        outcomes, error = [], None
        for i, v in enumerate(values):
            torch.manual_seed(1)
            try:
                got = compiled(x.clone(), wrap(v) if wrapped else v)
            except Exception as exc:  # the construct's own failure is the measurement
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                break
            outcomes.append(_compare(got, wanted[i]))
        result["tensor" if wrapped else "number"] = {
            "compiles": _compiles(),
            "graph_breaks": len(_BREAKS),
            "outputs": error or min(outcomes, key=["DIFF", "close", "exact"].index),
        }
    return result


def main() -> None:
    out = {}
    for spec in sys.argv[2:]:
        name, dtype, backend, *only = spec.split(":")  # NAME:DTYPE:BACKEND[:None|False]
        modes = [{"None": None, "False": False}[m] for m in only] or [None, False]
        out[spec] = {str(d): measure(name, dtype, backend, d) for d in modes}
        print(spec, json.dumps(out[spec]), flush=True)
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
