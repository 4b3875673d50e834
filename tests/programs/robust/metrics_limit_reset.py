"""A harness that caps torch's metrics at 2 records, compiles past the cap, puts the default
back and clears the records midway (torch's own metrics helpers, as a benchmark script would)."""
import torch
import torch._dynamo.utils as dynamo_utils

dynamo_utils.set_compilation_metrics_limit(2)


@torch.compile(dynamic=False)
def f(x):
    return x + 1


for n in (2, 3, 4, 5):
    f(torch.ones(n))
dynamo_utils.set_compilation_metrics_limit(dynamo_utils.DEFAULT_COMPILATION_METRICS_LIMIT)
dynamo_utils.clear_compilation_metrics()
for n in (6, 7):
    f(torch.ones(n))
