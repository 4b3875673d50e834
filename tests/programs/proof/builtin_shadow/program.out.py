import torch


@torch.compile
def f(input, c):
    return input * c


def reads_builtin():
    return callable(input)


for n in (3, 4, 5):
    input_1 = torch.ones(n)
    torch._dynamo.mark_dynamic(input_1, 0)
    print(f(input_1, 0.5), reads_builtin())
