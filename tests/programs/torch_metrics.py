"""Run a script and print torch's own compile records per frame as JSON (the ground truth the
recorder is tested against). Forces the eager backend, as `recompile-fix profile --backend eager`.

Compile ids are unique only until ``torch._dynamo.reset()``, which numbers them from 0/0 again:
the records are counted per generation (this harness wraps reset() to mark where one ends). The
program may itself cap or swap torch's metrics deque, so every record is taken from
``record_compilation_metrics`` as torch makes it, not from the deque at exit. A program that
leaves with ``os._exit`` is counted before it goes. Output: one line
``TORCH_METRICS {"<name>:<first line>": compiles, ...}`` and one ``TORCH_GRAPH_BREAKS <n>``
(torch's own graph-break counter)."""

import collections
import json
import os
import runpy
import sys

import torch
import torch._dynamo
import torch._dynamo.utils as dynamo_utils

records = []  # (generation, CompilationMetrics) in the order torch made them
generation = [0]
_record = dynamo_utils.record_compilation_metrics


class _Deque(collections.deque):
    def append(self, item):
        super().append(item)
        records.append((generation[0], item))


def _keep_hook():
    if not isinstance(dynamo_utils._compilation_metrics, _Deque):
        dynamo_utils._compilation_metrics = _Deque(dynamo_utils._compilation_metrics, maxlen=100_000)


def _record_compilation_metrics(*args, **kwargs):
    _keep_hook()  # set_compilation_metrics_limit() and other tools replace the deque
    return _record(*args, **kwargs)


dynamo_utils.record_compilation_metrics = _record_compilation_metrics
for _name in ("_METRICS_CONTEXT", "_RUNTIME_METRICS_CONTEXT"):  # torch < 2.13: made at import
    _context = getattr(dynamo_utils, _name, None)
    if _context is not None:
        _context._on_exit = _record_compilation_metrics
_keep_hook()
_reset = torch._dynamo.reset


def _reset_and_count():
    _reset()
    generation[0] += 1


torch._dynamo.reset = _reset_and_count


def report():
    names = {}
    ids = collections.defaultdict(set)
    for gen, m in records:
        if getattr(m, "is_runtime", False):
            continue
        frame_id = (gen, str(m.compile_id).rsplit("/", 1)[0])
        if m.co_name:
            names[frame_id] = f"{m.co_name}:{m.co_firstlineno}"
        ids[frame_id].add(str(m.compile_id))
    per_frame = collections.Counter()
    for frame_id, compile_ids in ids.items():
        if frame_id in names:
            per_frame[names[frame_id]] += len(compile_ids)
    print("TORCH_METRICS " + json.dumps(dict(per_frame)), flush=True)
    print(f"TORCH_GRAPH_BREAKS {sum(dynamo_utils.counters['graph_break'].values())}", flush=True)


_exit = os._exit


def _report_and_exit(code):
    report()
    _exit(code)


os._exit = _report_and_exit
_compile = torch.compile
torch.compile = lambda *a, **k: _compile(*a, **{**k, "backend": "eager"})

# `torch_metrics.py -O script.py`: the script as `python -O` runs it (compiled with optimize=1:
# its asserts and `if __debug__:` blocks gone), in a process the warm runner can give (it runs
# no interpreter options; a cold `python -O` also compiles every module torch imports again).
optimized = sys.argv[1] == "-O"
script = sys.argv[2 if optimized else 1]
sys.argv = sys.argv[2 if optimized else 1 :]
try:
    if optimized:
        code = compile(open(script, "rb").read(), script, "exec", optimize=1)
        exec(code, {"__name__": "__main__", "__file__": script, "__builtins__": __builtins__})
    else:
        runpy.run_path(script, run_name="__main__")
finally:
    report()
