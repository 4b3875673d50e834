"""torch.compiler.set_stance around calls: eager_on_recompile (a changed size runs eagerly, no
compile), force_eager, then fail_on_recompile (the recompile attempt raises)."""
import torch


@torch.compile(dynamic=False)
def f(x):
    return x + 1


f(torch.ones(2))
torch.compiler.set_stance("eager_on_recompile")
f(torch.ones(3))
torch.compiler.set_stance("force_eager")
f(torch.ones(4))
torch.compiler.set_stance("default")
f(torch.ones(5))
torch.compiler.set_stance("fail_on_recompile")
try:
    f(torch.ones(6))
except Exception as exc:
    print("fail_on_recompile raised", type(exc).__name__)
torch.compiler.set_stance("default")
f(torch.ones(7))
