"""Run a script and print torch's own compile records per frame as JSON (the ground truth the
recorder is tested against). Forces the eager backend, as `recompile-fix profile --backend eager`."""

import collections
import json
import runpy
import sys

import torch
import torch._dynamo.utils as dynamo_utils

dynamo_utils.set_compilation_metrics_limit(100_000)
_compile = torch.compile
torch.compile = lambda *a, **k: _compile(*a, **{**k, "backend": "eager"})

script = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    names = {}
    ids = collections.defaultdict(set)
    for m in dynamo_utils.get_compilation_metrics():
        frame_id = str(m.compile_id).rsplit("/", 1)[0]
        if m.co_name:
            names[frame_id] = f"{m.co_name}:{m.co_firstlineno}"
        ids[frame_id].add(str(m.compile_id))
    print("TORCH_METRICS " + json.dumps({names[f]: len(c) for f, c in ids.items() if f in names}))
