import torch
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, width, rank):
        super().__init__()
        self.base = nn.Linear(width, width)
        self.lora_a = nn.Parameter(torch.randn(rank, width) * 0.01)
        self.lora_b = nn.Parameter(torch.zeros(width, rank))

    def forward(self, x):
        return self.base(x) + x @ self.lora_a.T @ self.lora_b.T


torch.manual_seed(0)
model = LoRALinear(16, 4)
# Parameters of several shapes run through one compiled frame: trace their sizes as dynamic.
torch._dynamo.config.force_parameter_static_shapes = False
torch._dynamo.config.force_nn_module_property_static_shapes = False
compiled = torch.compile(model, backend="eager")
x = torch.randn(8, 16)
outputs = []
for rank in (4, 8, 16, 32):  # a rank sweep: each swaps the adapter for one of another rank
    model.lora_a = nn.Parameter(torch.randn(rank, 16) * 0.01)
    model.lora_b = nn.Parameter(torch.randn(16, rank) * 0.01)
    outputs.append(compiled(x))
