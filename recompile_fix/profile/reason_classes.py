"""The recompile-reason registry: each reason kind the parser types (``REASON_KINDS``) has a stable
ID and a page (``recompile-fix reasons ID``, docs/reasons/ID.md): what torch guarded, a minimal
program that recompiles for it, what torch says (2.13's words), what changes it, and what to do
where no rule fixes it. Which rules fix it is read from the rules themselves (their ``consumes``)
when the page is made. IDs are never reused or renumbered: a new kind takes the next one.
"""

from __future__ import annotations

from dataclasses import dataclass

from recompile_fix.profile.model import REASON_KINDS

__all__ = ["REASON_CLASSES", "ReasonClass", "reason_class", "reason_id"]


@dataclass(frozen=True)
class ReasonClass:
    id: str  # "RC001": stable
    kind: str  # the parser's kind (REASON_KINDS)
    guarded: str  # what torch guarded, in a sentence or two
    example: str  # a minimal program that recompiles for it
    torch_says: str  # the guard failure as torch 2.13 words it (TORCH_LOGS=recompiles)
    changes_it: str  # what change in the program stops it
    otherwise: str  # what to do where no rule fixes it

    @property
    def title(self) -> str:
        return REASON_KINDS[self.kind]


_F = "@torch.compile(backend='eager')\n"

REASON_CLASSES: tuple[ReasonClass, ...] = (
    ReasonClass(
        "RC001",
        "size_mismatch",
        "A tensor's size along one dimension: the compiled graph was made for one size (a static "
        "shape) and the call brought another.",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(32, 8))\nf(torch.randn(17, 8))  # recompiles",
        "0/0: tensor 'x' size mismatch at index 0. expected 32, actual 17",
        "Mark the dimension dynamic before the first call (`torch._dynamo.mark_dynamic(x, 0)`, or "
        "`maybe_mark_dynamic` where a size may be specialised), or pad to a few fixed sizes.",
        "Automatic dynamic makes the size symbolic on the second compile by itself; a third compile "
        "means something specialised it (a size used as a Python int, formatted into a string, "
        "compared in a branch): move that use out of the compiled code.",
    ),
    ReasonClass(
        "RC002",
        "size_specialization",
        "A size that was dynamic became 0 or 1: torch specialises sizes 0 and 1 (broadcasting "
        "semantics), so a dynamic graph covers sizes >= 2 only.",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(3))\nf(torch.randn(4))  # dynamic now\n"
        "f(torch.randn(1))  # recompiles: 1 is special",
        "0/1: 2 <= x.size()[0]  # ... (user code shown is first use of this value--the guard itself "
        "is not due user code but due to 0/1 specialization in the framework; ...)",
        "Where sizes of 1 are real inputs (a batch of one, a generated token), mark the dimension "
        "unbacked (`torch._dynamo.decorators.mark_unbacked(x, 0)`) or accept one more graph.",
        "One extra compile for the size-1 case is often the cheapest answer; it is counted as "
        "expected by the accounting.",
    ),
    ReasonClass(
        "RC003",
        "rank_mismatch",
        "A tensor's number of dimensions.",
        f"{_F}def f(x):\n    return x.sum()\n\nf(torch.randn(4))\nf(torch.randn(4, 4))  # recompiles",
        "0/0: tensor 'x' rank mismatch. expected 1, actual 2",
        "Give the compiled function tensors of one rank (reshape or unsqueeze before the call).",
        "A graph per rank is inherent: dynamic shapes never cover a change of rank.",
    ),
    ReasonClass(
        "RC004",
        "dtype_mismatch",
        "A tensor's dtype.",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4))\nf(torch.randn(4).half())  # recompiles",
        "0/0: tensor 'x' dtype mismatch. expected Float, actual Half",
        "Cast once, before the compiled code, to the dtype the model runs in.",
        "A graph per dtype is inherent (kernels differ); switching dtype on purpose (mixed "
        "precision phases) costs one compile per dtype.",
    ),
    ReasonClass(
        "RC005",
        "device_mismatch",
        "A tensor's device (or device index).",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4))\nf(torch.randn(4, device='meta'))  # recompiles",
        "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, ...), actual "
        "DispatchKeySet(Meta, ...)",
        "Move inputs to the model's device before the compiled call.",
        "A graph per device is inherent.",
    ),
    ReasonClass(
        "RC006",
        "stride_mismatch",
        "A tensor's strides (its memory layout): a transposed or sliced view.",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4, 4))\nf(torch.randn(4, 4).t())  # recompiles",
        "0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1",
        "`.contiguous()` before the call, or mark the dimension dynamic where the stride follows a size that changes.",
        "Layouts that alternate on purpose cost a graph each.",
    ),
    ReasonClass(
        "RC007",
        "requires_grad_mismatch",
        "Whether a tensor requires grad.",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4))\nf(torch.randn(4, requires_grad=True))  # recompiles",
        "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",
        "Keep inputs' requires_grad the same across calls (detach, or set it once).",
        "Training and evaluation calls with different requires_grad compile once each.",
    ),
    ReasonClass(
        "RC008",
        "dispatch_key_mismatch",
        "A tensor's dispatch keys on the same device (a subclass, a functional or inference tensor).",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4))\nwith torch.inference_mode():\n"
        "    f(torch.randn(4))  # an inference tensor: recompiles",
        "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, ...), actual DispatchKeySet(CPU, ...)",
        "Call with tensors made the same way (no inference-mode tensors into a graph traced outside it).",
        "A graph per kind of tensor is inherent.",
    ),
    ReasonClass(
        "RC009",
        "scalar_value",
        "A Python int or float argument's value: the first compile bakes the number into the graph "
        "as a constant; automatic dynamic makes it symbolic after it changes (one recompile), unless "
        "the code specialises it (a branch on it, a shape made from it).",
        f"{_F}def f(x, c):\n    return x * c\n\nf(torch.randn(4), 0.5)\nf(torch.randn(4), 0.25)  # recompiles",
        "0/0: c == 0.5  # def f(x, c): return x * c  # model.py:3 in f",
        "Pass the number as a 0-d tensor (`torch.tensor(c)`, made once per value), so the graph takes it as an input.",
        "Where the number picks a branch or a shape, one graph per value is inherent; PGO "
        "(`TORCH_COMPILE_JOB_ID`) marks it dynamic from a second run, not the first.",
    ),
    ReasonClass(
        "RC010",
        "module_attribute",
        "An attribute of an `nn.Module` (an int, float, bool or string) that the compiled code "
        "read: module attributes are guarded by value.",
        "class M(torch.nn.Module):\n    def forward(self, x):\n        return x * self.scale\n\n"
        "m = torch.compile(M(), backend='eager'); m.scale = 0.5; m(torch.randn(4))\n"
        "m.scale = 0.25; m(torch.randn(4))  # recompiles",
        "0/0: self.scale == 0.5  # return x * self.scale  # model.py:3 in forward",
        "Hold a value that changes in a buffer (`register_buffer`, updated in place with `fill_`), "
        "or a 0-d tensor attribute.",
        "A counter or a step number read in `forward` recompiles every step: move it out of the compiled code.",
    ),
    ReasonClass(
        "RC011",
        "attribute_presence",
        "Whether an attribute (or a dict key) exists: `hasattr`, `getattr(..., default)`, `'k' in d`.",
        f"{_F}def f(x, d):\n    return x + d['a'] if 'a' in d else x\n\n"
        "f(torch.randn(4), {})\nf(torch.randn(4), {'a': 1.0})  # recompiles",
        "0/0: not ___dict_contains('a', d)",
        "Create the attribute (or key) before the first call, with a neutral value, so it is always there.",
        "Optional inputs that come and go (a kwargs dict whose keys change) cost a graph per key set.",
    ),
    ReasonClass(
        "RC012",
        "global_value",
        "A module-level global number the compiled code read.",
        "LR = 0.1\n\n" + _F + "def f(x):\n    return x * LR\n\nf(torch.randn(4))\nLR = 0.05\n"
        "f(torch.randn(4))  # recompiles",
        "0/0: G['LR'] == 0.1  # return x * LR  # model.py:5 in f",
        "Pass the value in as an argument (a 0-d tensor), or keep it in a tensor updated in place.",
        "A global that is a constant of the program should not change: if it does, it is state.",
    ),
    ReasonClass(
        "RC013",
        "optimizer_param_group",
        "An optimizer hyper-parameter in `param_groups` (`lr`, `momentum`, ...) read by a compiled "
        "`optimizer.step()`: a scheduler changes it each step.",
        "opt = torch.optim.Adam(model.parameters(), lr=0.01)\n"
        "sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)\n"
        "step = torch.compile(opt.step, backend='eager')\nfor _ in range(3):\n"
        "    loss(model).backward(); step(); sched.step()  # recompiles each step",
        "0/0: self.param_groups[0]['lr'] == 0.01  # for group in self.param_groups:  # optim/adam.py:229 in step",
        "Build the optimizer with `lr=torch.tensor(0.01)` (a tensor learning rate; torch's compiled-optimizer recipe).",
        "Optimizers whose step reads the lr as a Python number in a branch cannot take a tensor: "
        "compile the model, not the step.",
    ),
    ReasonClass(
        "RC014",
        "training_flag",
        "`module.training`: `train()` and `eval()` flip it.",
        "m = torch.compile(torch.nn.Dropout(0.1), backend='eager')\nm(torch.randn(4)); m.eval()\n"
        "m(torch.randn(4))  # recompiles",
        "0/0: self.training == True  # if self.training:  # model.py:3 in forward",
        "Nothing to change: one graph for training and one for evaluation is expected.",
        "If it flips every step, keep evaluation out of the training loop's compiled function.",
    ),
    ReasonClass(
        "RC015",
        "grad_mode",
        "Whether grad mode is on (`torch.no_grad()` around a call).",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4))\nwith torch.no_grad():\n"
        "    f(torch.randn(4))  # recompiles",
        "0/0: GLOBAL_STATE changed: grad_mode",
        "Nothing to change where both modes are used on purpose (one graph each).",
        "If only one mode is meant, set it around every call the same way.",
    ),
    ReasonClass(
        "RC016",
        "global_state",
        "Global torch state other than grad mode (deterministic algorithms, default dtype, autocast).",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4))\ntorch.use_deterministic_algorithms(True)\n"
        "f(torch.randn(4))  # recompiles",
        "0/0: GLOBAL_STATE changed: deterministic_algorithms",
        "Set global state once, before the first compiled call.",
        "Code that toggles it per call compiles once per setting.",
    ),
    ReasonClass(
        "RC017",
        "container_length",
        "The length of a list, tuple or dict the compiled code iterated or indexed.",
        f"{_F}def f(xs):\n    return sum(xs)\n\nf([torch.randn(4)])\nf([torch.randn(4)] * 2)  # recompiles",
        "0/0: len(xs) == 1",
        "Stack the items into one tensor (a dimension that can be dynamic), or pad the list to a fixed length.",
        "A graph per length is inherent for Python containers (each loop is unrolled).",
    ),
    ReasonClass(
        "RC018",
        "type_mismatch",
        "An argument's Python type: an int became a float, a tensor became a number, None became a value.",
        f"{_F}def f(x, c):\n    return x * c\n\nf(torch.randn(4), 1)\nf(torch.randn(4), 1.5)  # recompiles",
        "0/1: ___check_type_id(c, 94...), type=<class 'float'>",
        "Pass one type every time (`float(c)`, or a 0-d tensor).",
        "An argument that is sometimes None costs a graph for each case; pass a neutral tensor instead.",
    ),
    ReasonClass(
        "RC019",
        "id_mismatch",
        "An object's identity: a function, a module or another object the graph closed over was "
        "replaced by another (a new lambda per call, a re-created submodule), or two arguments "
        "stopped (or started) being the same tensor.",
        f"{_F}def f(x, fn):\n    return fn(x)\n\nf(torch.randn(4), lambda t: t + 1)\n"
        "f(torch.randn(4), lambda t: t + 1)  # a new lambda: recompiles",
        "0/0: ___check_obj_id(fn, 1403...)",
        "Create the object once (a module-level function, a submodule built in `__init__`) and pass the same one.",
        "Swapping submodules on purpose (adapters) costs a graph per object; see the LoRA hotswap APIs "
        "of diffusers and PEFT.",
    ),
    ReasonClass(
        "RC020",
        "limit_hit",
        "Not a guard: the frame has compiled `recompile_limit` times (8 by default) and from here on "
        "runs eagerly, uncompiled, for every new case.",
        f"{_F}def f(x, c):\n    return x * c\n\nfor i in range(10):\n    f(torch.randn(4), i + 0.5)  # the 9th call runs eagerly",
        "Dynamo recompile limit exceeded ... Limit type: recompile_limit",
        "Fix the recompiles that led to it (the frame's other reasons); raising "
        "`torch._dynamo.config.recompile_limit` only hides them.",
        "Several compiled models sharing one code object share one limit: "
        "`torch.compile(..., isolate_recompiles=True)` (torch >= 2.13) gives each its own.",
    ),
    ReasonClass(
        "RC021",
        "other",
        "A guard the parser does not type (a new wording, or a guard no example here has shown).",
        "(any)",
        "(torch's own words, kept whole in the Profile's `text`)",
        "Read torch's text: the source it names is what changed.",
        "Please report it with the guard text, so it gets a class of its own.",
    ),
    ReasonClass(
        "RC022",
        "value_branch",
        "Which side of a comparison a number traced as a symbol (dynamic) took: the code branches on "
        "it (`if self.current_epoch < self.freeze_epochs:`), and each side is a graph of its own.",
        "@torch.compile(backend='eager', dynamic=True)\ndef f(x, epoch):\n    if epoch < 4:\n"
        "        return x.detach() * 2\n    return x * 2\n\nfor epoch in range(2, 6):\n"
        "    f(torch.randn(4), epoch)  # epoch 4 recompiles: the other side",
        "0/0: epoch <= 3  # if epoch < 4:  # rc22.py:4 in f (_dynamo/variables/tensor.py:2606 in evaluate_expr)",
        "Nothing needs to: one graph per side of the branch, each compiled once. To share one graph, "
        "compute both sides as tensors and pick with `torch.where`.",
        "A branch with more sides than two (a chain of `elif`s on the value) compiles once per side.",
    ),
    ReasonClass(
        "RC023",
        "storage_offset",
        "Where a tensor starts in its storage: a view into a larger tensor (a crop, a slice) starts "
        "past 0, a tensor of its own at 0; once the offset was traced as a symbol, 0 and 1 are "
        "specialised, as sizes are.",
        f"{_F}def f(x):\n    return x * 2\n\nbig = torch.randn(16, 4)\nf(big[2:6])  # a view: offset 8\n"
        "f(big[3:9])  # another view and size: offset and size dynamic\n"
        "f(torch.randn(6, 4))  # a tensor of its own, offset 0: recompiles",
        "0/2: 2 <= x.storage_offset()  # B, C, H, W = x.shape  # timm/layers/patch_embed.py:121 in forward",
        "Pass tensors of one kind: `.contiguous()` on the views before the call (a copy, offset 0), "
        "or views on every call.",
        "A test-time augmentation that crops (views) on some calls and flips (copies) on others "
        "compiles for each kind; `.contiguous()` at the call makes them one.",
    ),
    ReasonClass(
        "RC024",
        "dim_marking_added",
        "Whether a tensor was marked dynamic (torch guards the mark itself, pytorch PR #176341): "
        "a graph traced with unmarked tensors, from an earlier call on another path (a "
        "warm-up, a calibration pass), does not serve a call whose tensor is marked, even at a "
        "size the graph had.",
        f"{_F}def f(x):\n    return x * 2\n\nf(torch.randn(4, 3))  # a warm-up, unmarked\n"
        "x = torch.randn(4, 3)\ntorch._dynamo.mark_dynamic(x, 0)\nf(x)  # marked: recompiles",
        "0/0: _has_dynamo_dim_marking is present on runtime tensor but was absent at compile time",
        "Mark the tensor at every call that reaches the compiled code, the earlier one too (or mark "
        "none), so that one graph serves them all.",
        "A calibration or warm-up pass before a marked loop costs this one compile; where the two "
        "passes also differ in train/eval mode or grad mode, they are graphs of their own anyway.",
    ),
)

_BY_KIND = {c.kind: c for c in REASON_CLASSES}
_BY_ID = {c.id: c for c in REASON_CLASSES}


def reason_id(kind: str) -> str:
    """The stable ID of a reason kind (an unknown kind is "other")."""
    return (_BY_KIND.get(kind) or _BY_KIND["other"]).id


def reason_class(id_or_kind: str) -> ReasonClass | None:
    return _BY_ID.get(id_or_kind.upper()) or _BY_KIND.get(id_or_kind)
