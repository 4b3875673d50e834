import torch

torch._logging.set_logs(recompiles=True)


@torch.compile
def fn(x):
    return x + 1


x = torch.ones(3)
torch._dynamo.mark_dynamic(x, 0)
fn(x)
x = torch.ones(4)
torch._dynamo.mark_dynamic(x, 0)
fn(x)
