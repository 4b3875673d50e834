"""An application that configures logging after importing torch: dictConfig disables every
logger that existed (torch's included), so handlers added to them hear nothing."""
import logging.config

import torch


@torch.compile(dynamic=False)
def f(x, c):
    y = x + 1
    torch._dynamo.graph_break()
    return y * c


f(torch.ones(2), 1)
logging.config.dictConfig({"version": 1, "disable_existing_loggers": True,
                           "handlers": {"h": {"class": "logging.StreamHandler"}},
                           "root": {"handlers": ["h"], "level": "WARNING"}})
f(torch.ones(2), 2)
f(torch.ones(3), 3)
