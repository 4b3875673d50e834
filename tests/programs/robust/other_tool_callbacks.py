"""Another tool that owns dynamo's compile callbacks: it clears them (dropping everyone else's)
and registers its own start/end callbacks."""
import torch
from torch._dynamo.callback import callback_handler, on_compile_end, on_compile_start

seen = []


@torch.compile(dynamic=False)
def f(x):
    return x + 1


f(torch.ones(2))
callback_handler.clear()
on_compile_start(lambda args: seen.append(("start", args.compile_id)))
on_compile_end(lambda args: seen.append(("end", args.compile_id)))
f(torch.ones(3))
f(torch.ones(4))
print("other tool saw", seen)
