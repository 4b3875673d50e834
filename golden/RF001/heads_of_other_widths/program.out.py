"""Ten classifier heads of different output widths, each compiled on its own, all called with
the same features: they share one compiled frame (torch.compile's wrapper of a module), each
head's parameters have their own shapes, and the frame hits the recompile limit."""

import torch
from torch import nn

torch.manual_seed(0)
heads = [nn.Linear(8, 4 + width) for width in range(10)]
# Parameters of several shapes run through one compiled frame: trace their sizes as dynamic.
torch._dynamo.config.force_parameter_static_shapes = False
torch._dynamo.config.force_nn_module_property_static_shapes = False
compiled_heads = [torch.compile(head, backend="eager") for head in heads]
features = torch.randn(4, 8)
for _ in range(2):
    logits = [head(features) for head in compiled_heads]
print([tuple(t.shape) for t in logits])
