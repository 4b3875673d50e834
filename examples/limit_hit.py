"""A static-shape function called with ten different sizes: it hits the recompile limit.

With `dynamic=False` each new size of `x` recompiles `add_one`. After 8 compiles
(`recompile_limit`) Dynamo gives up and runs the frame eagerly from then on.
"""

import torch

SIZES = range(1, 11)


@torch.compile(dynamic=False)
def add_one(x):
    return torch.relu(x) + 1


def main():
    torch.manual_seed(0)
    inputs = [torch.randn(size) for size in SIZES]
    outputs = [add_one(x) for x in inputs]
    return {"outputs": torch.cat(outputs)}


if __name__ == "__main__":
    main()
