"""One epoch of DDP training on CPU (gloo), started by torchrun, with a compiled model and a
ragged last batch on every rank.

    torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port PORT ddp_ragged.py OUT_DIR

100 rows, a DistributedSampler over 2 ranks gives each rank 50 rows; batches of 16 make
16, 16, 16 and 2, so the last batch recompiles the model's `forward` on both ranks
(`tensor 'x' size mismatch at index 0. expected 16, actual 2`). Each rank writes its losses, its
final parameters and torch's own compile counts to OUT_DIR/rank<R>.json.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ROWS, BATCH = 100, 16


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


def train_epoch(model, loader, optimizer):
    losses = []
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def compile_counts():
    import torch._dynamo.utils as dynamo_utils

    counts = {}
    for metrics in dynamo_utils.get_compilation_metrics():
        if metrics.co_name:
            key = f"{metrics.co_name}:{metrics.co_firstlineno}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def main():
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(ROWS, 8), torch.randint(0, 4, (ROWS,)))
    loader = DataLoader(dataset, batch_size=BATCH, sampler=DistributedSampler(dataset, shuffle=False))
    model = torch.compile(DDP(Classifier()), backend=os.environ.get("DDP_BACKEND", "eager"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = train_epoch(model, loader, optimizer)
    params = {name: p.detach().tolist() for name, p in model.named_parameters()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
        json.dump({"rank": rank, "losses": losses, "params": params, "compiles": compile_counts()}, fh)
    # Free DDP's reducer while its process group is still alive: the other order can hang gloo.
    del model, optimizer
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
