"""RF001 on real model code, piece by piece, without running torch: guard sources taken apart,
evidence per call site, tied dimensions, where a guard's tensor is at the user's call (through
`*args, **kwargs` wrappers, `**batch`, cache objects, the called module's attributes, library
code), and what the compiled code does with a size (a loop, a comparison, a call it cannot read).

The programs these Profiles stand for are under golden/RF001/ (keyword_through_wrapper,
dict_batch, positional_through_wrapper, cache_object, module_attribute, range_loop) and
tests/programs/hf/ (transformers models: tests/test_hf_corpus.py runs them)."""

from pathlib import Path

import libcst as cst
import pytest

from profiles import profile_of
from recompile_fix.analysis.call_targets import Base, locate
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.findings.finding import TRADE_OFF, UNPROVEN, Safety, stands_in_for
from recompile_fix.findings.plan import plan
from recompile_fix.profile.model import Compile, Frame, GraphBreak, Location, Reason, is_library_path, sha256_file
from recompile_fix.profile.sources import parse_source
from recompile_fix.rules import rule_by_id
from recompile_fix.rules.rf001_mark_dynamic.size_evidence import site_evidence
from recompile_fix.rules.rf001_mark_dynamic.size_uses import SizeUses, unseen_call

LIB = "/venv/lib/python3.11/site-packages/transformers/utils/generic.py"


def tensor(*shape):
    return {"type": "Tensor", "shape": list(shape), "stride": [], "dtype": "int64"}


def compile_at(cid, line, inputs, reasons=(), library=()):
    stack = [Location("program.py", line, line, 4, 40, "main"), *library]
    return Compile(id=cid, stack=stack, inputs=inputs, reasons=list(reasons))


def size(source, dim, expected, actual, entry):
    return Reason(
        kind="size_mismatch",
        text=f"tensor '{source}' size mismatch at index {dim}. expected {expected}, actual {actual}",
        entry=entry,
        source=source,
        dim=dim,
        expected=expected,
        actual=actual,
    )


# -- guard sources ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, root, steps",
    [
        ("x", "x", []),
        ("kwargs['input_ids']", "kwargs", [("item", "input_ids")]),
        ("args[1]", "args", [("item", 1)]),
        (
            "kwargs['past_key_values'].layers[0].keys",
            "kwargs",
            [("item", "past_key_values"), ("attr", "layers"), ("item", 0), ("attr", "keys")],
        ),
        (
            "self.cache.layers[3].values",
            "self",
            [("attr", "cache"), ("attr", "layers"), ("item", 3), ("attr", "values")],
        ),
        ('batch["x"]', "batch", [("item", "x")]),
    ],
)
def test_guard_sources_parse_into_chains(text, root, steps):
    path = parse_source(text)
    assert path.root == root and [(s.kind, s.key) for s in path.steps] == steps
    assert parse_source(path.code()) == path  # the recorder's spelling is torch's


@pytest.mark.parametrize("text", ["len(x)", "x.size()[0]", "___check_type_id(x, 1)", "1x"])
def test_anything_but_a_chain_does_not_parse(text):
    assert parse_source(text) is None


def test_library_paths():
    assert is_library_path(LIB) and is_library_path(".venv/lib/python3.11/site-packages/x.py")
    assert not is_library_path("src/train.py") and not is_library_path("/home/me/project/site_packages.py")


# -- evidence per call site ---------------------------------------------------------------------


def decode_frame():
    """b_cache_mistral's Profile, shapes as recorded: a prefill call (line 24) and a decode call
    (line 29) of one compiled frame; the decode call's keys grow with the mask."""
    keys = "kwargs['past_key_values'].layers[0].keys"
    frame = Frame(LIB, 1030, "wrapper")
    frame.compiles = [
        compile_at("0/0", 24, {"kwargs['input_ids']": tensor(2, 5), "kwargs['attention_mask']": tensor(2, 5)}),
        compile_at(
            "0/1",
            29,
            {"kwargs['input_ids']": tensor(2, 1), "kwargs['attention_mask']": tensor(2, 6), keys: tensor(2, 2, 5, 8)},
            [size("kwargs['input_ids']", 1, 5, 1, "0/0")],
        ),
        compile_at(
            "0/2",
            29,
            {"kwargs['input_ids']": tensor(2, 1), "kwargs['attention_mask']": tensor(2, 7), keys: tensor(2, 2, 6, 8)},
            [size(keys, 2, 5, 6, "0/1"), size("kwargs['input_ids']", 1, 5, 1, "0/0")],
        ),
        compile_at(
            "0/3",
            24,
            {"kwargs['input_ids']": tensor(2, 9), "kwargs['attention_mask']": tensor(2, 9)},
            [
                size("kwargs['input_ids']", 1, 1, 9, "0/2"),
                Reason("type_mismatch", "", entry="0/1", source=keys, expected="Tensor", actual="NoneType"),
                size("kwargs['input_ids']", 1, 5, 9, "0/0"),
            ],
        ),
    ]
    return frame


def test_each_call_gets_the_marks_its_own_compiles_show():
    prefill, decode = site_evidence(decode_frame())
    assert prefill.site.line == 24 and decode.site.line == 29
    # Prefill: the ids and the mask grew together (5 -> 9); the cache was empty there.
    assert prefill.changed == {"kwargs['input_ids']": {1}, "kwargs['attention_mask']": {1}}
    assert prefill.groups == [[("kwargs['input_ids']", 1), ("kwargs['attention_mask']", 1)]]
    # Decode: the mask and the keys, one apart; the ids are 1 there (a size-1 mark does nothing).
    keys = "kwargs['past_key_values'].layers[0].keys"
    assert decode.changed == {"kwargs['attention_mask']": {1}, keys: {2}}
    assert len(decode.groups) == 1
    assert prefill.none_and_tensor() == [keys]


def test_a_size_guard_against_another_calls_entry_ties_the_two_calls():
    """fn(torch.ones(3)); fn(torch.ones(4)): one compile per call; marking both merges them."""
    frame = Frame("program.py", 3, "fn")
    frame.compiles = [
        compile_at("0/0", 11, {"x": tensor(3)}),
        compile_at("0/1", 12, {"x": tensor(4)}, [size("x", 0, 3, 4, "0/0")]),
    ]
    first, second = site_evidence(frame)
    assert first.changed == second.changed == {"x": {0}}


def test_dimensions_that_moved_apart_are_not_tied():
    frame = Frame("program.py", 3, "step")
    shapes = [(5, 16), (5, 14), (2, 14)]
    frame.compiles = [
        compile_at(f"0/{i}", 9, {"ids": tensor(*s), "mask": tensor(*s), "labels": tensor(*s)})
        for i, s in enumerate(shapes)
    ]
    (evidence,) = site_evidence(frame)
    groups = sorted(sorted(g) for g in evidence.groups)
    # The batch dimension of all three is one tie, the length another; never half of either.
    assert groups == [[("ids", 0), ("labels", 0), ("mask", 0)], [("ids", 1), ("labels", 1), ("mask", 1)]]


def test_without_shapes_to_tell_changed_dimensions_count_as_tied():
    frame = Frame("program.py", 3, "step")
    frame.compiles = [
        compile_at("0/0", 9, {}),
        compile_at("0/1", 9, {}, [size("a", 0, 2, 3, "0/0"), size("b", 1, 4, 5, "0/0")]),
    ]
    (evidence,) = site_evidence(frame)
    assert len(evidence.groups) == 1  # marking more together is never the unsafe side


# -- where a guard's tensor is at the call ------------------------------------------------------


def call_of(code):
    """The outermost call of a one-line program."""
    source = SourceFile.parse(Path("program.py"), code)
    calls = source.nodes(cst.Call)
    return source, min(calls, key=lambda c: (source.positions[c].start.line, source.positions[c].start.column))


WRAPPER = {"positional": ["self"], "keyword_only": [], "varargs": "args", "varkw": "kwargs"}
WRAPPED_FUNC = {"positional": [], "keyword_only": [], "varargs": "args", "varkw": "kwargs"}
FORWARD = {"positional": ["self", "input_ids", "attention_mask"], "keyword_only": [], "varargs": None, "varkw": None}
STEP = {"positional": ["model", "batch"], "keyword_only": [], "varargs": None, "varkw": None}
STEP3 = {"positional": ["model", "w", "x"], "keyword_only": [], "varargs": None, "varkw": None}
MODULE = {"type": "Module"}


@pytest.mark.parametrize(
    "code, signature, guard, inputs, base, steps",
    [
        # transformers' `wrapper(self, *args, **kwargs)`: a keyword of the call.
        (
            "model(input_ids=ids, attention_mask=mask)",
            WRAPPER,
            "kwargs['input_ids']",
            {},
            Base(keyword="input_ids"),
            [],
        ),
        # ... or an item of the one `**` mapping.
        ("model(**batch)", WRAPPER, "kwargs['labels']", {}, Base(star=True), [("item", "labels")]),
        # self is separate: args[0] is the first positional argument.
        ("model(ids, mask)", WRAPPER, "args[1]", {}, Base(index=1), []),
        # `wrapped_func(*args, **kwargs)` installed as forward: self is args[0].
        ("model(ids, mask)", WRAPPED_FUNC, "args[1]", {"args[0]": {"type": "Module"}}, Base(index=0), []),
        # A plain forward called positionally, or its parameter filled from `**batch`.
        ("model(ids, mask)", FORWARD, "attention_mask", {}, Base(index=1), []),
        ("model(**batch)", FORWARD, "input_ids", {}, Base(star=True), [("item", "input_ids")]),
        # A chain into an object the call passes: the cache's layers.
        (
            "model(input_ids=x, past_key_values=cache)",
            WRAPPER,
            "kwargs['past_key_values'].layers[0].keys",
            {},
            Base(keyword="past_key_values"),
            [("attr", "layers"), ("item", 0), ("attr", "keys")],
        ),
        # self.<attr>: the module the call calls (a compiled module forwards attributes).
        (
            "step(next_id, mask)",
            FORWARD,
            "self.cache.layers[0].keys",
            {},
            Base(expr="step"),
            [("attr", "cache"), ("attr", "layers"), ("item", 0), ("attr", "keys")],
        ),
        ("self.decoder.forward(x, m)", FORWARD, "self.cache", {}, Base(expr="self.decoder"), [("attr", "cache")]),
        # A compiled plain function whose first parameter holds a module the call passes: the
        # batch is the second argument, not the first (a trial: the model was marked).
        ("train_step(model, batch)", STEP, "batch['x']", {"model": MODULE}, Base(index=1), [("item", "x")]),
        ("train_step(model, w, x)", STEP3, "x", {"model": MODULE}, Base(index=2), []),
        # ... and where the call does not pass it, it is the module's own `self`.
        ("compiled(batch)", STEP, "batch['x']", {"model": MODULE}, Base(index=0), [("item", "x")]),
    ],
)
def test_guard_sources_map_to_the_call(code, signature, guard, inputs, base, steps):
    source, call = call_of(code)
    frame = Frame(LIB, 1, "forward", signature=signature)
    compiles = [compile_at("0/0", 1, inputs)]
    target, why = locate(frame, compiles, guard, call, source, signature)
    assert why is None and target.base == base and [(s.kind, s.key) for s in target.steps] == steps


@pytest.mark.parametrize(
    "code, guard, why",
    [
        ("model(input_ids=ids)", "kwargs['attention_mask']", "does not pass `attention_mask`"),
        ("model(**a, **b)", "kwargs['x']", "several `**` mappings"),
        ("model(*inputs)", "args[0]", "passes *args"),
    ],
)
def test_what_the_call_does_not_pass_is_said(code, guard, why):
    source, call = call_of(code)
    frame = Frame(LIB, 1, "wrapper", signature=WRAPPER)
    target, reason = locate(frame, [compile_at("0/0", 1, {})], guard, call, source, WRAPPER)
    assert target is None and why in reason


def test_library_code_reaches_only_what_the_user_holds():
    """model.generate(...): transformers copies the ids and makes its own cache."""
    library = [
        Location("/venv/lib/python3.11/site-packages/transformers/generation/utils.py", 4333, function="_prefill")
    ]
    held = compile_at(
        "0/0",
        1,
        {"kwargs['attention_mask']": {**tensor(2, 6), "held_by": "mask"}, "kwargs['input_ids']": tensor(2, 6)},
        library=library,
    )
    source, call = call_of("model.generate(input_ids=ids, attention_mask=mask)")
    frame = Frame(LIB, 1, "wrapped_func", signature=WRAPPED_FUNC)
    target, _ = locate(frame, [held], "kwargs['attention_mask']", call, source, WRAPPED_FUNC)
    assert target.base == Base(expr="mask") and target.steps == ()
    target, why = locate(frame, [held], "kwargs['input_ids']", call, source, WRAPPED_FUNC)
    assert target is None and "`_prefill` at transformers/generation/utils.py:4333" in why


# -- what the compiled code does with a size ----------------------------------------------------


def function(code, name="forward"):
    source = SourceFile.parse(Path("program.py"), code)
    return source, next(f for f in source.nodes(cst.FunctionDef) if f.name.value == name)


@pytest.mark.parametrize(
    "body, loops",
    [
        ("for t in range(x.size(1)):\n        h = h + x[:, t]", {1}),
        ("B, T, C = x.shape\n    for t in range(T):\n        h = h + x[:, t]", {1}),
        ("n = x.shape[0]\n    out = [h * i for i in range(n)]", {0}),
        ("for row in x:\n        h = h + row", {0}),
        ("for step in x.unbind(2):\n        h = h + step", {2}),
        ("for step in torch.unbind(x, dim=1):\n        h = h + step", {1}),
        ("h = h + x.sum(1)", set()),
        ("for i in range(4):\n        h = h + x", set()),
    ],
)
def test_dimensions_a_loop_runs_over(body, loops):
    _, func = function(f"def forward(x, h):\n    {body}\n    return h\n")
    assert set(SizeUses(func, "x").loop_dims()) == loops


def test_dimensions_compared_for_equality():
    _, func = function("def f(x):\n    if x.shape[0] == 4:\n        return x\n    return -x\n", "f")
    assert SizeUses(func, "x").compared_dims() == {0}


@pytest.mark.parametrize(
    "body, compared",
    [
        # A match statement specialises what it matches: `case 4:` is an equality test.
        ("match x.shape[0]:\n        case 4:\n            return x", {0}),
        ("n = x.shape[0]\n    match n:\n        case 4:\n            return x", {0}),
        ("B, T = x.shape\n    match (mode, T):\n        case (1, 8):\n            return x", {1}),
        ("match x.size(1):\n        case 2 | 3:\n            return x\n        case _:\n            pass", {1}),
        # The whole shape: the positions a case tests with a value, not its captures.
        ("match x.shape:\n        case (B, 4, C):\n            return x", {1}),
        ("match x.size():\n        case [4, _] | (B, 8 as T):\n            return x", {0, 1}),
        ("match x.shape[:2]:\n        case (2, n):\n            return x", {0}),
        ("match x.shape:\n        case (B, T):\n            return x", set()),
        ("match mode:\n        case 4:\n            return x", set()),
        # Membership and lookups in a Python container built here need the value.
        ("if x.shape[0] in (4, 8):\n        return x", {0}),
        ("return x * TABLE[x.size(1)]", {1}),
        ("n = x.shape[0]\n    return x * TABLE.get(n, 1.0)", {0}),
        ("scales = {4: 1.0}\n    return x * scales[len(x)]", {0}),
        # A tensor indexed by a size, or a container of unknown kind: no lookup of the value.
        ("return x * pos[x.shape[0]]", set()),
        ("return x * table[x.shape[0]]", set()),
    ],
)
def test_dimensions_matched_or_looked_up(body, compared):
    code = f"TABLE = {{4: 0.5, 8: 2.0}}\n\n\ndef f(x, mode, pos, table):\n    {body}\n    return -x\n"
    source, func = function(code, "f")
    assert SizeUses(func, "x", source).compared_dims() == compared


def test_a_lookup_in_a_container_held_on_self():
    code = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = {4: 0.5, 8: 2.0}
        self.pos = nn.Parameter(torch.zeros(16))

    def forward(self, x):
        return x * self.scales[x.shape[0]] + self.pos[x.shape[1]]
"""
    source, func = function(code)
    assert SizeUses(func, "x", source).compared_dims() == {0}


MODULE = """
import torch
from torch import nn
from transformers import AutoModel

class Block(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.lm = lm
        self.pretrained = AutoModel.from_pretrained("x")

    def helper(self, x):
        return x

    def seen(self, x):
        return self.helper(torch.relu(self.fc(x))).sum(1)

    def passed_in(self, x):
        return self.lm(x)

    def from_package(self, x):
        return self.pretrained(x)
"""


@pytest.mark.parametrize(
    "name, unseen",
    [("seen", None), ("passed_in", "`self.lm(...)`"), ("from_package", "`self.pretrained(...)`")],
)
def test_calls_into_code_the_analysis_cannot_read(name, unseen):
    source, func = function(MODULE, name)
    found = unseen_call(source, func)
    assert (found is None) if unseen is None else found.startswith(unseen)


# -- the finding, end to end on a recorded-shape Profile ----------------------------------------

DECODE = """\
import torch

model = torch.compile(Model())


def generate(prompt, cache):
    mask = torch.ones_like(prompt)
    out = model(input_ids=prompt, attention_mask=mask, past_key_values=cache)
    for _ in range(4):
        mask = torch.cat([mask, mask[:, :1]], dim=1)
        out = model(input_ids=out, attention_mask=mask, past_key_values=cache)
"""


def test_a_cache_is_marked_in_a_loop_with_the_mask_it_is_tied_to(tmp_path):
    (tmp_path / "program.py").write_text(DECODE)
    keys = "kwargs['past_key_values'].layers[{}].{}"
    frame = Frame(LIB, 1030, "wrapper", signature=WRAPPER)

    def decode(cid, length, reasons=()):
        inputs = {"kwargs['input_ids']": tensor(2, 1), "kwargs['attention_mask']": tensor(2, length + 1)}
        for layer in range(3):
            for leaf in ("keys", "values"):
                inputs[keys.format(layer, leaf)] = tensor(2, 2, length, 8)
        return Compile(
            cid, stack=[Location("program.py", 11, 11, 14, 78, "generate")], inputs=inputs, reasons=list(reasons)
        )

    frame.compiles = [
        Compile(
            "0/0",
            stack=[Location("program.py", 8, 8, 10, 78, "generate")],
            inputs={"kwargs['input_ids']": tensor(2, 5), "kwargs['attention_mask']": tensor(2, 5)},
        ),
        decode("0/1", 5, [size("kwargs['input_ids']", 1, 5, 1, "0/0")]),
        decode("0/2", 6, [size(keys.format(0, "keys"), 2, 5, 6, "0/1")]),
    ]
    profile = profile_of(frame)
    profile.sources = {"program.py": sha256_file(tmp_path / "program.py")}
    (finding,) = plan(profile, Project(tmp_path, profile.sources), (rule_by_id("RF001"),))
    assert finding.location.line == 11 and finding.safety is Safety.SAFE
    assert finding.params["mark"] == "maybe_mark_dynamic"  # transformers' code: it cannot raise
    assert [m["label"] for m in finding.params["marks"]] == ["mask"]
    (loop,) = finding.params["loops"]
    assert loop["label"] == "cache" and loop["container"] == [["attr", "layers"]]
    assert loop["leaves"] == [{"steps": [["attr", "keys"]], "dims": [2]}, {"steps": [["attr", "values"]], "dims": [2]}]
    edits = rule_by_id("RF001").fix(finding, SourceFile.parse(Path("program.py"), DECODE), "torch")
    inserted = "".join(e.new_text for e in edits)
    assert inserted == (
        "        torch._dynamo.maybe_mark_dynamic(mask, 1)\n"
        "        for layer in cache.layers:\n"
        "            torch._dynamo.maybe_mark_dynamic(layer.keys, 2)\n"
        "            torch._dynamo.maybe_mark_dynamic(layer.values, 2)\n"
    )


def test_sizes_are_followed_through_locals_and_into_helpers_of_the_file():
    code = """
import torch
from torch import nn


def unroll(cell, seq):
    h = seq[:, 0]
    for t in range(1, seq.size(1)):
        h = cell(seq[:, t], h)
    return h


class Block(nn.Module):
    def forward(self, y):
        n = y.shape[0]
        if n == 4:
            return y
        return -y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x) + self.run(x)

    def run(self, z):
        return unroll(torch.add, z)
"""
    source, func = function(code)
    forward = next(
        f for f in source.nodes(cst.FunctionDef) if f.name.value == "forward" and "self.block" in source.code(f)
    )
    uses = SizeUses(forward, "x", source)
    assert uses.compared_dims() == {0}  # Block.forward, through `n = y.shape[0]`
    assert set(uses.loop_dims()) == {1} and "`unroll`" in uses.loop_dims()[1]  # Net.run -> unroll


# -- what the recorder records -----------------------------------------------------------------


def test_the_recorder_walks_arguments_as_torch_spells_guard_sources():
    import torch

    from recompile_fix.profile.recorder.inputs import InputWalk, signature

    class Layer:
        def __init__(self, length):
            self.keys = None if length is None else torch.zeros(2, 2, length, 8)
            self.values = None if length is None else torch.zeros(2, 2, length, 8)

    class Cache:
        def __init__(self, length):
            self.layers = [Layer(length) for _ in range(3)]

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)  # parameters and submodules are not walked
            self.cache = Cache(5)

    walk = InputWalk(torch)
    walk.visit("self", Holder(), 0)
    kwargs = {"input_ids": torch.zeros(2, 6, dtype=torch.long), "past_key_values": Cache(None), "use_cache": True}
    for key, value in kwargs.items():
        walk.visit(f"kwargs[{key!r}]", value, 1)
    walk.visit("args[0]", (torch.zeros(3), [torch.zeros(1)]), 1)
    shapes = {k: v.get("shape", v.get("value", v.get("type"))) for k, v in walk.entries.items()}
    assert shapes == {
        "self": "Module",
        "self.cache.layers[0].keys": [2, 2, 5, 8],
        "self.cache.layers[0].values": [2, 2, 5, 8],
        "self.cache.layers[1].keys": [2, 2, 5, 8],
        "self.cache.layers[1].values": [2, 2, 5, 8],
        "self.cache.layers[2].keys": [2, 2, 5, 8],
        "self.cache.layers[2].values": [2, 2, 5, 8],
        "kwargs['input_ids']": [2, 6],
        "kwargs['use_cache']": True,
        "args[0][0]": [3],
        "args[0][1][0]": [1],
    }
    for source in walk.entries:
        assert source == "self" or parse_source(source) is not None

    def wrapper(self, *args, **kwargs):
        return args, kwargs

    assert signature(wrapper.__code__) == {
        "positional": ["self"],
        "keyword_only": [],
        "varargs": "args",
        "varkw": "kwargs",
    }


def test_the_recorder_keeps_short_strings_of_attribute_chains():
    # transformers' classifiers default `self.config.problem_type` on the first call: the value
    # it was given is what RF010 sets before the model is compiled.
    import torch

    from recompile_fix.profile.recorder.inputs import MAX_STRINGS, InputWalk

    class Config:
        def __init__(self):
            self.problem_type = "single_label_classification"
            self.label = "x" * 500  # too long to be a setting
            self.names = {"a": "b"}  # items are not attribute chains

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = Config()
            self.mode = "train"

    walk = InputWalk(torch)
    walk.visit("self", Model(), 0)
    walk.visit("reduction", "mean", 0)  # an argument: torch guards it as a constant anyway
    strings = {k: v["value"] for k, v in walk.entries.items() if v["type"] == "str"}
    assert strings == {"self.config.problem_type": "single_label_classification", "self.mode": "train"}
    assert walk.entries["self"]["file"] == __file__  # where a hidden lazy default is read from

    class Many:
        def __init__(self):
            for i in range(2 * MAX_STRINGS):
                setattr(self, f"s{i}", "v")

    many = InputWalk(torch)
    many.visit("self.config", Many(), 1)
    assert sum(e["type"] == "str" for e in many.entries.values()) == MAX_STRINGS


def test_a_loop_over_a_container_of_readable_blocks_is_readable():
    code = """
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return x * 2


class Stack(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.others = lm.layers

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x)
        return x

    def other(self, x):
        for layer in self.others:
            x = layer(x)
        return x
"""
    source, forward = function(code)
    assert unseen_call(source, forward) is None
    other = next(f for f in source.nodes(cst.FunctionDef) if f.name.value == "other")
    assert unseen_call(source, other).startswith("`layer(...)`")


GENERATE = """\
from helpers import load_compiled_model

model = load_compiled_model()
for prompt in prompts:
    out = model.generate(input_ids=prompt, max_new_tokens=8)
"""


@pytest.mark.parametrize("compiled_here", [True, False, "eager"])
def test_library_made_calls_get_dynamic_true_at_the_compile_call_or_say_what_to_do(tmp_path, compiled_here):
    """At the compile call: a trade-off where its backend generates kernels, unproven (for `fix`)
    under one that does not (a trial: generate() with a static cache under eager, 4 -> 2)."""
    program = GENERATE
    backend = ', backend="eager"' if compiled_here == "eager" else ""
    if compiled_here:
        program = program.replace(
            "model = load_compiled_model()\n",
            f"import torch\n\nmodel = load_model()\nmodel.forward = torch.compile(model.forward{backend})\n",
        )
    (tmp_path / "program.py").write_text(program)
    line = program.splitlines().index("    out = model.generate(input_ids=prompt, max_new_tokens=8)") + 1
    library = [
        Location("/venv/lib/python3.11/site-packages/transformers/generation/utils.py", 4333, function="_prefill")
    ]
    frame = Frame(LIB, 121, "wrapped_func", signature=WRAPPED_FUNC)
    frame.compiles = [
        Compile(
            f"0/{i}",
            stack=[Location("program.py", line, line, 10, 61, "<module>"), *library],
            inputs={"args[0]": {"type": "Module"}, "kwargs['input_ids']": tensor(2, n)},
            reasons=[size("kwargs['input_ids']", 1, 6, n, "0/0")] if i else [],
        )
        for i, n in enumerate((6, 10))
    ]
    profile = profile_of(frame)
    profile.sources = {"program.py": sha256_file(tmp_path / "program.py")}
    (finding,) = plan(profile, Project(tmp_path, profile.sources), (rule_by_id("RF001"),))
    if compiled_here:
        compile_line = program.splitlines().index(f"model.forward = torch.compile(model.forward{backend})") + 1
        assert finding.safety is Safety.UNSAFE and finding.location.line == compile_line
        assert finding.unsafe_because == (UNPROVEN if backend else TRADE_OFF)
        edits = rule_by_id("RF001").fix(finding, SourceFile.parse(Path("program.py"), program), "torch")
        assert [e.new_text for e in edits] == [", dynamic=True"]
    else:
        assert finding.safety is Safety.NONE and finding.location.line == line
        assert any("`_prefill` at transformers/generation/utils.py:4333" in n for n in finding.notes)
        assert any(n.startswith("what to do: pass `dynamic=True` where the model is compiled") for n in finding.notes)


def test_methods_of_a_passed_in_object_are_not_a_tensors():
    """A cache (or any object) passed to the compiled function: `layer.update(...)` on what is
    taken from it may be a library's code."""
    code = """
from torch import nn


class Block(nn.Module):
    def forward(self, h):
        return h


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, h, cache):
        for block, layer in zip(self.blocks, cache.layers):
            h = block(h) + layer.update(h)
        return h.sum(1)
"""
    source, func = function(code)
    func = next(f for f in source.nodes(cst.FunctionDef) if f.name.value == "forward" and "cache" in source.code(f))
    assert unseen_call(source, func) is None  # taken for tensor methods without the Profile's word
    assert unseen_call(source, func, frozenset({"cache"})).startswith("`layer.update(...)`")


def test_two_calls_on_one_line_are_told_apart_by_column():
    from recompile_fix.report import call_site_label

    site = Location(file="train.py", line=55, col=43, function="<module>")
    assert call_site_label(site, []) == "called at train.py:55 (in <module>)"
    assert call_site_label(site, [], with_column=True) == "called at train.py:55:44 (in <module>)"


def test_a_size_specialised_in_one_dim_is_not_small_in_another():
    """A trial's Qwen2 server: a batch of 1 was specialised in `input_ids` dim 0; the note read
    "`input_ids` dim 1 had size 1 (or 0)" too, where prompt widths were 8 to 23."""
    from recompile_fix.profile.model import Frame, Reason
    from recompile_fix.rules.rf001_mark_dynamic.size_evidence import SiteEvidence

    specialised = Reason("size_specialization", "2 <= L['input_ids'].size()[0]", source="input_ids", dim=0)
    evidence = SiteEvidence(
        frame=Frame(name="score", file="prog.py", first_line=20, compiles=[]),
        site=None,
        compiles=[],
        sizes={("input_ids", 0): [4, 1], ("input_ids", 1): [21, 22]},
        reasons=[specialised],
    )
    assert evidence.small("input_ids", [0]) and not evidence.small("input_ids", [1])


@pytest.mark.parametrize("cut_at_a_break", [False, True])
def test_a_mark_beside_tied_tensors_the_call_cannot_mark_is_unproven(tmp_path, cut_at_a_break):
    """model.generate(attention_mask=mask): the mask is the user's, the ids are transformers'
    copies whose size changes with it. torch recompiles for the unmarked ids whatever the mask's
    mark (a trial: 7 -> 7), so the mark is unproven, for `fix` to try. Where the library code
    between is itself compiled code that graph-breaks (the frame was cut from a compiled forward:
    golden/RF013/loss_type), what it passes is traced inside once the break goes: as before."""
    program = (
        "import torch\n\nmodel = load()\nmask = ones()\nout = model.generate(input_ids=ids, attention_mask=mask)\n"
    )
    (tmp_path / "program.py").write_text(program)
    library = [Location(LIB, 1036, function="wrapper")]
    caller = Frame(LIB, 1030, "wrapper", signature=WRAPPER)
    if cut_at_a_break:
        caller.graph_breaks = [GraphBreak(reason="a logging call", location=Location(LIB, 1036))]
    frame = Frame(LIB, 121, "wrapped_func", signature=WRAPPED_FUNC)
    frame.compiles = [
        Compile(
            f"0/{i}",
            stack=[Location("program.py", 5, 5, 6, 58, "<module>"), *library],
            inputs={
                "kwargs['attention_mask']": {**tensor(2, n), "held_by": "mask"},
                "kwargs['input_ids']": tensor(2, n),
            },
            reasons=[size("kwargs['attention_mask']", 1, 6, n, "0/0"), size("kwargs['input_ids']", 1, 6, n, "0/0")]
            if i
            else [],
        )
        for i, n in enumerate((6, 10))
    ]
    profile = profile_of(frame, caller)
    profile.sources = {"program.py": sha256_file(tmp_path / "program.py")}
    (finding,) = plan(profile, Project(tmp_path, profile.sources), (rule_by_id("RF001"),))
    assert "mask" in finding.message and finding.location.line == 5
    if cut_at_a_break:
        assert finding.safety is Safety.SAFE
        return
    assert finding.safety is Safety.UNSAFE and finding.unsafe_because == UNPROVEN
    unproven = "unproven: torch recompiles for the size of an input it sees change unmarked"
    assert any(n.startswith(unproven) for n in finding.notes)
    # Where the program compiles the model, `dynamic=True` there is the marks' fallback, for `fix`
    # to try where it drops them (a trial's generate(): 7 -> 5).
    compile_line = 'model.forward = torch.compile(model.forward, backend="eager")\n'
    (tmp_path / "program.py").write_text(program.replace("model = load()\n", "model = load()\n" + compile_line))
    for c in frame.compiles:
        c.stack[0] = Location("program.py", 6, 6, 6, 58, "<module>")
    profile.sources = {"program.py": sha256_file(tmp_path / "program.py")}
    found = plan(profile, Project(tmp_path, profile.sources), (rule_by_id("RF001"),))
    (marks,), (fallback,) = [f for f in found if not f.fallback], [f for f in found if f.fallback]
    assert marks.unsafe_because == UNPROVEN and not marks.fallback and marks.location.line == 6
    assert fallback.fallback and fallback.unsafe_because == UNPROVEN and fallback.location.line == 4
    assert "dynamic=True" in fallback.message and stands_in_for(fallback, marks)


@pytest.mark.parametrize(
    "first, moves",
    [
        ("torch.stack(obs)", False),  # torch builds a tensor and touches nothing else
        ("obs.to(device)", False),
        ("sample(obs)", True),  # the program's own call: its order may matter
        ("torch.randn(3)", True),  # random numbers: their order is the program's
    ],
)
def test_binding_an_argument_moves_it_only_before_calls_that_could_tell(first, moves):
    """A trial's DQN: `td_loss(torch.stack(o), torch.tensor(ac), ...)` was unsafe, as if binding
    the second argument to a name could reorder anything the first call does."""
    import libcst as cst

    from recompile_fix.analysis.call_site_code import call_runs_before_argument
    from recompile_fix.analysis.source import SourceFile

    source = SourceFile.read(Path("p.py"), f"loss = td_loss({first}, torch.tensor(acts))\n".encode())
    call = next(c for c in source.nodes(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == "td_loss")
    statement, _ = source.statement_of(call)
    assert call_runs_before_argument(source, statement, call, call.args[1]) is moves
