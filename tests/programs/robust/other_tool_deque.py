"""Another tool that hooks torch's metrics the way the recorder does: it swaps the deque for its
own subclass (dropping the recorder's), and keeps the records for itself."""
import collections

import torch
import torch._dynamo.utils as dynamo_utils

mine = []


class ToolDeque(collections.deque):
    def append(self, item):
        mine.append(item.compile_id)
        super().append(item)


dynamo_utils._compilation_metrics = ToolDeque(maxlen=64)


@torch.compile(dynamic=False)
def f(x):
    return x + 1


for n in (2, 3, 4):
    f(torch.ones(n))
print("other tool saw", [str(c) for c in mine])
