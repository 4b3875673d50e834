"""A Python float argument that changes on every call.

With `dynamic=False` a Python float is baked into the graph as a constant and guarded with
`alpha == <value>`, so each new value compiles `scale_shift` again.
"""

import torch

ALPHAS = (0.5, 1.5, 2.5, 3.5)


@torch.compile(dynamic=False)
def scale_shift(x, alpha):
    return torch.tanh(x * alpha) + alpha * x.mean()


def main():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    outputs = [scale_shift(x, alpha) for alpha in ALPHAS]
    return {"outputs": torch.stack(outputs)}


if __name__ == "__main__":
    main()
