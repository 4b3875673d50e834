import torch


@torch.compile
def f(input, c):
    return input * c


def reads_builtin():
    return callable(input)


for n in (3, 4, 5):
    print(f(torch.ones(n), 0.5), reads_builtin())
