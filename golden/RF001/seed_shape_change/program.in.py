import torch

torch._logging.set_logs(recompiles=True)


@torch.compile
def fn(x):
    return x + 1


fn(torch.ones(3))
fn(torch.ones(4))
