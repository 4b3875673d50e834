"""A program that strips every handler from torch's loggers midway (a 'quiet torch' helper), and
resets torch's log settings with set_logs."""
import logging

import torch


@torch.compile(dynamic=False)
def f(x, c):
    y = x + 1
    torch._dynamo.graph_break()
    return y * c


f(torch.ones(2), 1)
for name in list(logging.root.manager.loggerDict):
    if name.startswith("torch"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
torch._logging.set_logs(dynamo=logging.ERROR)
f(torch.ones(2), 2)
f(torch.ones(3), 3)
