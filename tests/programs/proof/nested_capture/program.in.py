import torch

x = 2.0


@torch.compile
def f(x, c):
    return x * c


def main():
    scale = lambda t: t * x
    out = []
    for n in (3, 4, 5):
        out.append(scale(f(torch.ones(n), 0.5)))
    return out


RESULTS = main()
