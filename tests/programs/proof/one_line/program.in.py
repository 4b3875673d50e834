import torch


@torch.compile
def f(x, c):
    return x * c


RESULTS = []


def main():
    for n in (3, 4, 5):
        x = torch.ones(n); RESULTS.append(f(x, 0.5))


main()
