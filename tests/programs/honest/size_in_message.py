"""A size formatted into a message: `norm` passes `f"... {n}"` to `torch._assert`, which makes
dynamo specialise `x.shape[0]`. Automatic dynamic shapes fail to generalise it: 8 sizes, 8
compiles. A `maybe_mark_dynamic(x, 0)` before the call changes nothing (8 -> 8, the same
reasons); a hard `mark_dynamic` raises ConstraintViolationError (issue 30, cause 3)."""

import torch


@torch.compile(backend="eager")
def norm(x):
    n = x.shape[0]
    torch._assert(n <= 64, f"at most 64 rows, got {n}")
    return x / x.sum()


def main():
    outputs = []
    for n in (3, 4, 5, 6, 7, 8, 9, 10):
        x = torch.arange(1, n + 1, dtype=torch.float32)
        outputs.append(norm(x))
    return outputs


if __name__ == "__main__":
    main()
