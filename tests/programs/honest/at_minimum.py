"""A program already at its minimum: `step` compiles once (the batch never changes size), and
the one recompile is the switch to `torch.no_grad()` evaluation, which is legitimate. A fix
here can change nothing (issue 30, cause 3)."""

import torch


@torch.compile(backend="eager")
def step(x, w):
    return torch.tanh(x @ w).sum(dim=1)


def main():
    torch.manual_seed(0)
    w = torch.randn(4, 3, requires_grad=True)
    outputs = []
    for _ in range(3):
        x = torch.randn(5, 4)
        loss = step(x, w).sum()
        loss.backward()
        outputs.append(loss.detach())
    with torch.no_grad():
        outputs.append(step(torch.randn(5, 4), w))
    return outputs


if __name__ == "__main__":
    main()
