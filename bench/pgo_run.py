"""One run of a `bench/pgo_matrix.py` program: the eager backend forced on every `torch.compile`,
the program run as `__main__`, then torch's own compilation metrics counted (compiles: the
compile ids of frames that compiled, limit hits: attempts torch refused at the recompile limit)
and the program's `outputs` list saved for the side-by-side comparison.

usage: pgo_run.py COUNTS.json OUTPUTS.pt PROGRAM.py
"""

import json
import os
import runpy
import sys

import torch
import torch._dynamo.utils as dynamo_utils

from recompile_fix.profile.reasons import is_limit_hit

counts_path, outputs_path, program = sys.argv[1:4]
dynamo_utils.set_compilation_metrics_limit(100_000)
_compile = torch.compile
torch.compile = lambda *args, **kwargs: _compile(*args, **{**kwargs, "backend": "eager"})
sys.argv = [program]
sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
torch.manual_seed(0)
namespace = runpy.run_path(program, run_name="__main__")

compiled_ids, refused_ids = set(), set()
for metrics in dynamo_utils.get_compilation_metrics():
    if getattr(metrics, "is_runtime", False) or metrics.compile_id is None:
        continue
    if is_limit_hit(metrics.fail_reason):
        refused_ids.add(str(metrics.compile_id))
    elif metrics.co_name:
        compiled_ids.add(str(metrics.compile_id))
with open(counts_path, "w", encoding="utf-8") as fh:
    json.dump({"compiles": len(compiled_ids - refused_ids), "limit_hits": len(refused_ids)}, fh)
outputs = [t.detach() if isinstance(t, torch.Tensor) else t for t in namespace.get("outputs", [])]
torch.save(outputs, outputs_path)
