"""recompile-fix: find the frames that torch.compile recompiles, and edit the source so it stops."""

__version__ = "0.1.0"
