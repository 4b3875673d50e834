"""Negative: a 0-d float64 tensor in `torch.full_like` gives wrong values under inductor (torch
2.13 to 2.15 compile it once and return the first call's fill on every later call), so RF002
leaves the number alone although the eager backend would show no difference."""

import torch


@torch.compile(dynamic=False)
def fill_like(x, value):
    return torch.full_like(x, value) + x


def main():
    x = torch.zeros(2, 3)
    return [fill_like(x, value) for value in (0.5, 0.7, 1.3)]


if __name__ == "__main__":
    main()
