"""The project's base class for its losses, in a file of its own."""

from torch import nn


class BaseLoss(nn.Module):
    """Losses share the reduction setting."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction
