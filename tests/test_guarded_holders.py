"""The recorder's record of which module holds a guarded attribute (profile/recorder/value_guards.py):
the class by what ran, for a module of the user's that library code holds."""

import torch
from torch import nn

from recompile_fix.profile.recorder.value_guards import guarded_holders


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.scaling = 1.0


def test_the_module_holding_a_guarded_attribute_is_described_as_the_inputs_describe_modules():
    model = nn.Module()
    model.layers = nn.ModuleList([nn.Module()])
    model.layers[0].q_proj = Scaled()
    failed = [
        "0/0: L['args'][0]._modules['layers']._modules['0']._modules['q_proj'].scaling == 2.0",
        "0/0: L['step'] == 3",  # no holder: a local number
        "0/1: L['args'][0]._modules['gone'].scaling == 2.0",  # nothing there: skipped, no error
    ]
    holders = guarded_holders(failed, {"args": (model, torch.ones(1)), "step": 4}, {}, nn.Module)
    assert holders == {
        "args[0]._modules['layers']._modules['0']._modules['q_proj']": {
            "type": "Module",
            "class": "Scaled",
            "qualname": "Scaled",
            "file": __file__,
        }
    }
