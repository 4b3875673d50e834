"""Three compiled functions that recompile, for `verify` and `apply --verify`.

* `scale(y)`: its argument grows (3, 5, 7). RF001's fix (mark dim 0 dynamic) is good: 1 compile.
* `head(x)`: its argument grows too, but the code specialises the size in a match statement
  (`match x.shape[0]:` / `case 4:`). RF001 offers no mark: the graph torch traced dynamic at 5
  rejects 4 (the run's `excludes`); a hard `mark_dynamic` there (a test-only rule plants one)
  makes torch raise ConstraintViolationError on the first call: the wrong fix `verify` must catch.
* `shift(x, alpha)`: a Python float that changes on every call (`dynamic=False`). Wrapping it
  in a tensor (a test-only rule does) sends a tensor into `if alpha > 1.0`: a graph break.
"""

import torch


@torch.compile
def head(x):
    match x.shape[0]:
        case 4:
            return x * 2
    return x + 1


@torch.compile
def scale(y):
    return y * 3 + 1


@torch.compile(dynamic=False)
def shift(x, alpha):
    if alpha > 1.0:
        return x * alpha
    return x - alpha


def main():
    outputs = []
    for size in (4, 5, 6):
        x = torch.arange(size, dtype=torch.float32)
        outputs.append(head(x))
    for size in (3, 5, 7):
        y = torch.arange(size, dtype=torch.float32)
        outputs.append(scale(y))
    base = torch.ones(3)
    for alpha in (0.5, 1.5, 2.5):
        outputs.append(shift(base, alpha))
    return outputs


if __name__ == "__main__":
    main()
