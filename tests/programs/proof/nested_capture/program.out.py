import torch

x = 2.0


@torch.compile
def f(x, c):
    return x * c


def main():
    scale = lambda t: t * x
    out = []
    for n in (3, 4, 5):
        x_1 = torch.ones(n)
        torch._dynamo.mark_dynamic(x_1, 0)
        out.append(scale(f(x_1, 0.5)))
    return out


RESULTS = main()
