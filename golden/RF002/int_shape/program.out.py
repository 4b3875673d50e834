"""An int used as a shape cannot become a tensor; under `dynamic=False` each new value compiles
again. `dynamic_sources` names that one int: the tensors stay static, the int symbolic."""

import torch

torch.compiler.config.dynamic_sources = "L['rows']"


@torch.compile(dynamic=False)
def row_sums(x, rows):
    return x.view(rows, -1).sum(dim=1)


x = torch.arange(12.0)
for rows in (2, 3, 4, 6):
    row_sums(x, rows)
