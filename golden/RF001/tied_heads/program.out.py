import torch
from torch import nn

torch.manual_seed(0)
widths = [8 + 4 * i for i in range(10)]
heads = [nn.Linear(w, 3) for w in widths]
# Parameters of several shapes run through one compiled frame: trace their sizes as dynamic.
torch._dynamo.config.force_parameter_static_shapes = False
torch._dynamo.config.force_nn_module_property_static_shapes = False
compiled = [torch.compile(head, backend="eager") for head in heads]
outputs = []
for step in range(2):
    for width, head in zip(widths, compiled):
        x = torch.randn(5, width)
        outputs.append(head(x))
