"""A long tensor computation followed by a tail that uses a changing int.

`pipeline` does ten ops in `expensive_prefix` that never look at `k`; only the last line uses
it. With `dynamic=False` the int is guarded `k == <value>`, so every new `k` recompiles the
whole frame, prefix included.
"""

import torch

KS = (1, 2, 3, 4)


def expensive_prefix(x):
    y = torch.sin(x)
    y = y * 2.0 + 1.0
    y = torch.relu(y)
    y = y @ y.T
    y = torch.softmax(y, dim=-1)
    y = torch.cumsum(y, dim=0)
    y = torch.tanh(y)
    y = y - y.mean(dim=0, keepdim=True)
    y = torch.exp(-y.abs())
    return torch.log1p(y)


@torch.compile(dynamic=False)
def pipeline(x, k):
    y = expensive_prefix(x)
    return y * k


def main():
    torch.manual_seed(0)
    x = torch.randn(6, 6)
    outputs = [pipeline(x, k) for k in KS]
    return {"outputs": torch.stack(outputs)}


if __name__ == "__main__":
    main()
