"""Run a program the way the equivalence tests need: same seed, eager backend, and a record of
what each compiled callable returned (first calls) plus torch's own compile counts.

The outputs are recorded by the same code `recompile-fix verify` loads into the user's process
(`recompile_fix.profile.compiled_outputs`), keyed by the callable's qualified name only, so that
`program.in.py` and `program.out.py` line up.

usage: run_recording.py OUT.pt SCRIPT [ARGS...]
"""

import collections
import io
import os
import runpy
import sys

import torch
import torch._dynamo.utils as dynamo_utils

from recompile_fix.profile.compiled_outputs import OutputRecorder, install

MAX_CALLS = 50
recorder = OutputRecorder(torch, max_calls=MAX_CALLS, with_file=False)
install(torch, recorder, backend="eager")
dynamo_utils.set_compilation_metrics_limit(100_000)
torch.manual_seed(0)

out_path, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(script))


class Tee(io.TextIOBase):
    """What the program prints, passed on and kept (compared too: tests/test_proof.py)."""

    def __init__(self, stream):
        self.stream, self.kept = stream, io.StringIO()

    def write(self, text):
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


sys.stdout = printed = Tee(sys.stdout)
program = runpy.run_path(script, run_name="__main__")
sys.stdout = printed.stream


def tensors_of(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value.detach()]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [v.detach() for v in value]
    return []


# The tensors the program keeps at module level (e.g. `losses`), as one "call" each: what a fix
# that changes which callables are compiled (RF007) is compared on.
kept = {name: [tensors_of(v)] for name, v in program.items() if not name.startswith("_") and tensors_of(v)}
frames = collections.defaultdict(set)
for m in dynamo_utils.get_compilation_metrics():
    frames[str(m.compile_id).rsplit("/", 1)[0]].add(str(m.compile_id))
names = {str(m.compile_id).rsplit("/", 1)[0]: m.co_name for m in dynamo_utils.get_compilation_metrics() if m.co_name}
compiles = collections.Counter()
for frame_id, ids in frames.items():
    compiles[names.get(frame_id, "?")] += len(ids)
torch.save(
    {"outputs": recorder.by_key(), "compiles": dict(compiles), "globals": kept, "stdout": printed.kept.getvalue()},
    out_path,
)
