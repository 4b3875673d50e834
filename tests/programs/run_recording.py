"""Run a program the way the equivalence tests need: same seed, eager backend, and a record of
what each compiled callable returned (first calls) plus torch's own compile counts.

usage: run_recording.py OUT.pt SCRIPT [ARGS...]
"""

import collections
import functools
import runpy
import sys

import torch
import torch._dynamo.utils as dynamo_utils
from torch.utils._pytree import tree_leaves

MAX_CALLS = 50
outputs: dict[str, list] = collections.defaultdict(list)


def _record(key, result):
    if len(outputs[key]) < MAX_CALLS:
        outputs[key].append([t.detach().clone() for t in tree_leaves(result) if isinstance(t, torch.Tensor)])
    return result


_compile = torch.compile


def compile_recording(model=None, **kwargs):
    kwargs["backend"] = "eager"
    if model is None:
        return lambda m: compile_recording(m, **kwargs)
    compiled = _compile(model, **kwargs)
    if isinstance(compiled, torch.nn.Module):
        return compiled  # recorded by the class-level __call__ below
    key = getattr(model, "__qualname__", repr(model))

    @functools.wraps(model)
    def call(*args, **kw):
        return _record(key, compiled(*args, **kw))

    return call


def optimized_module_call(self, *args, **kwargs):
    return _record(type(self._orig_mod).__qualname__, torch.nn.Module.__call__(self, *args, **kwargs))


_module_compile = torch.nn.Module.compile


def module_compile(self, *args, **kwargs):
    kwargs["backend"] = "eager"
    _module_compile(self, *args, **kwargs)
    compiled = self._compiled_call_impl
    key = type(self).__qualname__
    self._compiled_call_impl = lambda *a, **k: _record(key, compiled(*a, **k))


torch.compile = compile_recording
torch._dynamo.eval_frame.OptimizedModule.__call__ = optimized_module_call
torch.nn.Module.compile = module_compile
dynamo_utils.set_compilation_metrics_limit(100_000)
torch.manual_seed(0)

out_path, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, __import__("os").path.dirname(script))
runpy.run_path(script, run_name="__main__")
frames = collections.defaultdict(set)
for m in dynamo_utils.get_compilation_metrics():
    frames[str(m.compile_id).rsplit("/", 1)[0]].add(str(m.compile_id))
names = {str(m.compile_id).rsplit("/", 1)[0]: m.co_name for m in dynamo_utils.get_compilation_metrics() if m.co_name}
compiles = collections.Counter()
for frame_id, ids in frames.items():
    compiles[names.get(frame_id, "?")] += len(ids)
torch.save({"outputs": dict(outputs), "compiles": dict(compiles)}, out_path)
