"""The programs `bench/pgo_matrix.py` measures: one small, self-contained program per recompile
class, as people write it (plain `torch.compile`, no backend: the bench forces eager). Each keeps
what its compiled calls returned in a module-level `outputs` list, which the bench compares
between runs (same seed).

The first 13 are the rows of the PGO matrix in /work/shared/reference/anchors-2026-12.md §2
(torch 2.13: PGO's run 2 removes one compile for the first five, nothing for the rest), with the
shapes row also as a compiled function (torch 2.13's PGO keys a compiled nn.Module's frame by a
closure hash of the module object, new in every process, so it never carries over for
`torch.compile(module)`), and a numpy schedule (issue 27's bar); the rest are classes real
projects hand-fix: kwargs key sets (one whose keys carry tensors, one that pops keys and adds
them back as None, as xDiT's PR #781 fixed), ten heads behind one frame, a warm-up call before a
marked loop, an eval loop after a training loop at other lengths, and an annealed float
attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROGRAMS", "BenchProgram"]


@dataclass(frozen=True)
class BenchProgram:
    name: str  # the row's id (`--rows`)
    title: str  # the row as the table prints it
    source: str


_HEADER = """import torch
from torch import nn

torch.manual_seed(0)
outputs = []
"""


def _program(body: str) -> str:
    return _HEADER + "\n" + body.strip() + "\n"


PROGRAMS: tuple[BenchProgram, ...] = (
    BenchProgram(
        "shapes",
        "tensor dim 0 sizes 3,4,5,6",
        _program(
            """
model = nn.Linear(8, 8)
compiled = torch.compile(model)
for n in (3, 4, 5, 6):
    x = torch.randn(n, 8)
    outputs.append(compiled(x))
"""
        ),
    ),
    BenchProgram(
        "shapes_fn",
        "tensor dim 0 sizes 3,4,5,6 (compiled function)",
        _program(
            """
weight = torch.randn(8, 8)


@torch.compile
def project(x):
    return (x @ weight).relu()


for n in (3, 4, 5, 6):
    outputs.append(project(torch.randn(n, 8)))
"""
        ),
    ),
    BenchProgram(
        "ragged",
        "ragged last batch 32,32,32,17",
        _program(
            """
data = torch.randn(113, 8)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
compiled = torch.compile(model)
for start in range(0, 113, 32):
    batch = data[start : start + 32]
    outputs.append(compiled(batch))
"""
        ),
    ),
    BenchProgram(
        "int_arg",
        "python int argument 1..4",
        _program(
            """
@torch.compile
def scaled(x, n):
    return x * n + n


x = torch.randn(4, 8)
for n in (1, 2, 3, 4):
    outputs.append(scaled(x, n))
"""
        ),
    ),
    BenchProgram(
        "float_arg",
        "python float argument",
        _program(
            """
@torch.compile
def blend(x, alpha):
    return x * alpha + (1 - alpha) * x.sin()


x = torch.randn(4, 8)
for alpha in (0.1, 0.2, 0.3, 0.4):
    outputs.append(blend(x, alpha))
"""
        ),
    ),
    BenchProgram(
        "numpy_schedule",
        "numpy schedule indexed by the epoch in forward",
        _program(
            """
import numpy as np


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.schedule = np.linspace(1.0, 0.1, 20)

    def forward(self, x, epoch):
        return self.fc(x) * self.schedule[epoch]


model = Model()
compiled = torch.compile(model)
x = torch.randn(4, 8)
for epoch in range(6):
    outputs.append(compiled(x, epoch))
"""
        ),
    ),
    BenchProgram(
        "adam_lr",
        "Adam+ExponentialLR, compiled step (5 steps)",
        _program(
            """
model = nn.Linear(8, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)


@torch.compile
def step():
    opt.step()


x = torch.randn(16, 8)
for _ in range(5):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    step()
    sched.step()
outputs.append(model.weight.detach().clone())
"""
        ),
    ),
    BenchProgram(
        "module_int",
        "nn.Module int attribute self.scale 1..4",
        _program(
            """
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.scale = 1

    def forward(self, x):
        return self.proj(x) * self.scale


model = Scaled()
compiled = torch.compile(model)
x = torch.randn(4, 8)
for scale in (1, 2, 3, 4):
    model.scale = scale
    outputs.append(compiled(x))
"""
        ),
    ),
    BenchProgram(
        "module_float",
        "nn.Module float attribute (a margin) annealed, 4 values",
        _program(
            """
class MarginLoss(nn.Module):
    def __init__(self, margin=0.5):
        super().__init__()
        self.margin = margin

    def forward(self, score):
        return (self.margin - score).clamp(min=0)


criterion = MarginLoss()
compiled = torch.compile(criterion)
score = torch.randn(4, 8)
for epoch in range(4):
    criterion.margin = 0.5 + 0.1 * epoch
    outputs.append(compiled(score))
"""
        ),
    ),
    BenchProgram(
        "module_float_static",
        "a float attribute (fade-in alpha) under dynamic=False",
        _program(
            """
class FadeIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.old = nn.Linear(8, 8)
        self.new = nn.Linear(8, 8)
        self.alpha = 0.0

    def forward(self, x):
        return self.alpha * self.new(x) + (1 - self.alpha) * self.old(x)


model = FadeIn()
compiled = torch.compile(model, dynamic=False)
x = torch.randn(4, 8)
for step in range(4):
    model.alpha = min(1.0, step / 3)
    outputs.append(compiled(x))
"""
        ),
    ),
    BenchProgram(
        "global_int",
        "global int 1..4",
        _program(
            """
STEP = 1


@torch.compile
def shifted(x):
    return x + STEP


x = torch.randn(4, 8)
for value in (1, 2, 3, 4):
    STEP = value
    outputs.append(shifted(x))
"""
        ),
    ),
    BenchProgram(
        "global_float",
        "global float (a margin) 0.2..0.5, compiled function",
        _program(
            """
MARGIN = 0.2


@torch.compile
def hinge(x):
    return torch.relu(x + MARGIN)


x = torch.randn(4, 8)
for value in (0.2, 0.3, 0.4, 0.5):
    MARGIN = value
    outputs.append(hinge(x))
"""
        ),
    ),
    BenchProgram(
        "int_size_arg",
        "python int offset used as a size (arange), 0..12",
        _program(
            """
@torch.compile
def positions(x, offset):
    return x + torch.arange(offset, offset + x.shape[0], dtype=x.dtype)[:, None]


x = torch.randn(4, 8)
for offset in (0, 4, 8, 12):
    outputs.append(positions(x, offset))
"""
        ),
    ),
    BenchProgram(
        "train_eval",
        "train()/eval() flip x4",
        _program(
            """
model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))
compiled = torch.compile(model)
x = torch.randn(16, 8)
for _ in range(2):
    model.train()
    outputs.append(compiled(x))
    model.eval()
    outputs.append(compiled(x))
"""
        ),
    ),
    BenchProgram(
        "dtype",
        "dtype f32/f16/f64",
        _program(
            """
@torch.compile
def norm(x):
    return x / x.abs().amax()


x = torch.randn(4, 8)
for dtype in (torch.float32, torch.float16, torch.float64):
    outputs.append(norm(x.to(dtype)).float())
"""
        ),
    ),
    BenchProgram(
        "string_mode",
        'string mode "a".."d"',
        _program(
            """
@torch.compile
def act(x, mode):
    if mode == "a":
        return x.relu()
    if mode == "b":
        return x.sigmoid()
    if mode == "c":
        return x.tanh()
    return x.sin()


x = torch.randn(4, 8)
for mode in ("a", "b", "c", "d"):
    outputs.append(act(x, mode))
"""
        ),
    ),
    BenchProgram(
        "lora_rank",
        "LoRA-like rank change 4/8/16/32",
        _program(
            """
class LoraLinear(nn.Module):
    def __init__(self, rank):
        super().__init__()
        self.base = nn.Linear(16, 16)
        self.set_rank(rank)

    def set_rank(self, rank):
        self.lora_a = nn.Parameter(torch.randn(rank, 16) * 0.01)
        self.lora_b = nn.Parameter(torch.randn(16, rank) * 0.01)

    def forward(self, x):
        return self.base(x) + x @ self.lora_a.t() @ self.lora_b.t()


model = LoraLinear(4)
compiled = torch.compile(model)
x = torch.randn(4, 16)
for rank in (4, 8, 16, 32):
    model.set_rank(rank)
    outputs.append(compiled(x))
"""
        ),
    ),
    BenchProgram(
        "submodule_swap",
        "submodule type swap P1/P2/P3",
        _program(
            """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.proj(x))


model = Block()
compiled = torch.compile(model)
x = torch.randn(4, 8)
for act in (nn.ReLU(), nn.GELU(), nn.SiLU()):
    model.act = act
    outputs.append(compiled(x))
"""
        ),
    ),
    BenchProgram(
        "static_sizes",
        "sizes under dynamic=False",
        _program(
            """
model = nn.Linear(8, 8)
compiled = torch.compile(model, dynamic=False)
for n in (3, 4, 5, 6):
    outputs.append(compiled(torch.randn(n, 8)))
"""
        ),
    ),
    BenchProgram(
        "kwargs_keys",
        "kwargs dict whose key set changes",
        _program(
            """
class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, **kwargs):
        h = self.proj(x)
        if kwargs.get("cond") is not None:
            h = h + kwargs["cond"]
        if kwargs.get("mask") is not None:
            h = h * kwargs["mask"]
        return h


model = Denoiser()
compiled = torch.compile(model)
x = torch.randn(4, 8)
for step in range(4):
    extra = {}
    if step % 2 == 0:
        extra["cond"] = torch.randn(4, 8)
    if step >= 2:
        extra["mask"] = torch.ones(4, 8)
    outputs.append(compiled(x, **extra))
"""
        ),
    ),
    BenchProgram(
        "kwargs_key_popped",
        "kwargs key popped / added back as None (xDiT #781)",
        _program(
            """
class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, **kwargs):
        h = self.proj(x)
        if kwargs.get("cu_seqlens") is not None:
            h = h * kwargs["cu_seqlens"]
        return h


model = Denoiser()
compiled = torch.compile(model)
x = torch.randn(4, 8)
attention_kwargs = {}
for step in range(4):
    if step % 2:
        attention_kwargs.update(cu_seqlens=None, max_seqlen=None)
    else:
        attention_kwargs.pop("cu_seqlens", None)
        attention_kwargs.pop("max_seqlen", None)
    outputs.append(compiled(x, **attention_kwargs))
"""
        ),
    ),
    BenchProgram(
        "ten_heads",
        "ten heads of different widths, one code object",
        _program(
            """
heads = [nn.Linear(8, 4 + width) for width in range(10)]
compiled_heads = [torch.compile(head) for head in heads]
x = torch.randn(4, 8)
for _ in range(2):
    for head in compiled_heads:
        outputs.append(head(x))
"""
        ),
    ),
    BenchProgram(
        "train_then_eval",
        "train at lengths 8..20, then eval at 10, 14",
        _program(
            """
model = nn.Sequential(nn.Embedding(100, 16), nn.Dropout(0.1), nn.Linear(16, 2))
compiled = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for length in (8, 12, 16, 20):
    model.train()
    ids = torch.randint(0, 100, (4, length))
    loss = compiled(ids).logsumexp(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    for length in (10, 14):
        ids = torch.randint(0, 100, (4, length))
        outputs.append(compiled(ids))
"""
        ),
    ),
    BenchProgram(
        "warmup_mark",
        "warm-up call before a marked loop",
        _program(
            """
model = nn.Linear(8, 8)
compiled = torch.compile(model)
outputs.append(compiled(torch.randn(3, 8)))  # warm-up
for n in (4, 5, 6, 7):
    x = torch.randn(n, 8)
    torch._dynamo.mark_dynamic(x, 0)
    outputs.append(compiled(x))
"""
        ),
    ),
)
