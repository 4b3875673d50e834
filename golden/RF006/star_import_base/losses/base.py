"""The base class of the project's losses."""

from torch import nn

__all__ = ["BaseLoss"]


class BaseLoss(nn.Module):
    """Losses share the reduction setting."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction


def _helper():  # not exported: __all__ names BaseLoss only
    return None
