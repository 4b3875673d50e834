"""The random numbers of a run: every run recompile-fix makes of a program draws the same ones.

torch seeds its default generator afresh in each process, so two runs of an unseeded program
(`fix`'s before and after, `verify`'s) would differ in their outputs, and a warm runner's forked
child would share its server's state while a cold run drew its own. A generator the program
already used or seeded before `import torch` is left as the program set it; a later seed of its
own wins. The recorder calls these (``recorder.install``); standard library only.
"""

import sys

__all__ = ["RUN_SEED", "note_untouched_generators", "seed_generators"]

RUN_SEED = 0
_UNTOUCHED: dict[str, object] = {}  # what the program had not touched: "random" -> its state then


def note_untouched_generators() -> None:
    """Before the program runs (sitecustomize): the state of `random`, which our own imports
    loaded; at `import torch`, a different state means the program seeded or used it."""
    import random

    _UNTOUCHED["random"] = random.getstate()


def seed_generators(torch, numpy_before_torch: bool) -> None:
    import random

    if "random" not in _UNTOUCHED or random.getstate() == _UNTOUCHED["random"]:
        random.seed(RUN_SEED)
    torch.manual_seed(RUN_SEED)
    numpy = sys.modules.get("numpy")  # imported by `import torch` itself, unless the program did first
    if numpy is not None and not numpy_before_torch and hasattr(numpy, "random"):
        numpy.random.seed(RUN_SEED)
