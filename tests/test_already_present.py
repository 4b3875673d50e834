"""Idempotence over a Profile's life: a fix already in the code (the tool's own from an earlier
round, or written by hand) is recognised by its rule and never made twice, and static mode honours
what a Profile established about the program (it trains)."""

from pathlib import Path

import libcst as cst

from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.rewrite import rewrite
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.fix import settle
from recompile_fix.profile.model import Location, Profile
from recompile_fix.rules import ALL_RULES

RULES = {rule.id: rule for rule in ALL_RULES}

GENERATE = """import torch


def generate(model, idx):
    for _ in range(3):
        idx_cond = idx[:, -4:]
        logits = model(idx_cond)
        idx = torch.cat([idx, logits.argmax(-1)[:, -1:]], dim=1)
    return idx
"""


def _source(text: str) -> SourceFile:
    return SourceFile.parse(Path("program.py"), text)


def _call(source: SourceFile, code: str) -> list[int]:
    (call,) = [n for n in source.nodes(cst.Call) if source.code(n) == code]
    pos = source.positions[call]
    return [pos.start.line, pos.start.column, pos.end.line, pos.end.column]


def _mark_finding(text: str, dims: list[int], *, contiguous: bool = False) -> Finding:
    source = _source(text)
    call = _call(source, "model(idx_cond)")
    return Finding(
        rule="RF001",
        file="program.py",
        location=Location("program.py", call[0], call[2], call[1], call[3]),
        message="mark it",
        safety=Safety.SAFE,
        params={
            "call": call,
            "mark": "mark_dynamic",
            "marks": [
                {
                    "base": {"index": 0},
                    "steps": [],
                    "dims": dims,
                    "label": "idx",
                    "source": "idx",
                    "optional": False,
                    "contiguous": contiguous,
                }
            ],
            "loops": [],
        },
    )


def _fixed(text: str, finding: Finding) -> str:
    return rewrite("program.py", _source(text), [finding], RULES).after


def test_rf001_own_fix_made_again_is_already_present():
    once = _fixed(GENERATE, _mark_finding(GENERATE, [1], contiguous=True))
    assert "idx_cond = idx[:, -4:].clone(memory_format=torch.contiguous_format)" in once
    again = _mark_finding(once, [1], contiguous=True)
    where = RULES["RF001"].already_present(again, _source(once))
    assert where == "line 6, 7: already marked dynamic: `idx_cond` in dim 1", where


def test_rf001_recognises_hand_written_marks():
    for mark in (
        "torch._dynamo.maybe_mark_dynamic(idx_cond, index=1)",
        "mark_dynamic(idx_cond, [1, 0])",
        "torch._dynamo.decorators.mark_unbacked(idx_cond, (1,))",
    ):
        text = GENERATE.replace("        logits = model", f"        {mark}\n        logits = model")
        finding = _mark_finding(text, [1])
        assert RULES["RF001"].already_present(finding, _source(text)), mark


def test_rf001_narrows_to_the_dims_not_yet_marked():
    text = GENERATE.replace(
        "        logits = model", "        torch._dynamo.mark_dynamic(idx_cond, 1)\n        logits = model"
    )
    finding = _mark_finding(text, [0, 1])
    assert RULES["RF001"].already_present(finding, _source(text)) is None
    assert finding.params["marks"][0]["dims"] == [0]
    after = _fixed(text, finding)
    assert after.count("mark_dynamic(idx_cond") == 2 and "torch._dynamo.mark_dynamic(idx_cond, 0)" in after


def test_rf001_marks_that_do_not_hold_at_the_call_do_not_count():
    # Above the binding: the mark is on the tensor the name held before.
    text = GENERATE.replace(
        "        idx_cond = idx", "        torch._dynamo.mark_dynamic(idx_cond, 1)\n        idx_cond = idx"
    )
    assert RULES["RF001"].already_present(_mark_finding(text, [1]), _source(text)) is None
    # Marked, but the crop's copy is missing: the whole fix (the copy, then the marks on it).
    text = GENERATE.replace(
        "        logits = model", "        torch._dynamo.mark_dynamic(idx_cond, 1)\n        logits = model"
    )
    finding = _mark_finding(text, [1], contiguous=True)
    assert RULES["RF001"].already_present(finding, _source(text)) is None
    (entry,) = finding.params["marks"]
    assert entry["dims"] == [1] and entry["contiguous"]


DECODE = """import torch


def decode(model, cache, next_id):
    for layer in cache.layers:
        torch._dynamo.maybe_mark_dynamic(layer.keys, 2)
        torch._dynamo.maybe_mark_dynamic(layer.values, 2)
    logits = model(next_id, cache)
    return logits
"""


def _loop_finding(text: str, dims: list[int]) -> Finding:
    source = _source(text)
    call = _call(source, "model(next_id, cache)")
    leaves = [{"steps": [["attr", "keys"]], "dims": dims}, {"steps": [["attr", "values"]], "dims": dims}]
    return Finding(
        rule="RF001",
        file="program.py",
        location=Location("program.py", call[0], call[2], call[1], call[3]),
        message="mark them",
        safety=Safety.SAFE,
        params={
            "call": call,
            "mark": "maybe_mark_dynamic",
            "marks": [],
            "loops": [{"base": {"index": 1}, "label": "cache", "container": [["attr", "layers"]], "leaves": leaves}],
        },
    )


def test_rf001_recognises_its_loop_over_a_list_with_any_item_name():
    # The fix names the item afresh when `layer` is taken (`layer_1`): a loop already there,
    # whatever its variable, holds the marks; made again, it would mark every item twice.
    for text in (DECODE, DECODE.replace("for layer", "for entry").replace("(layer.", "(entry.")):
        where = RULES["RF001"].already_present(_loop_finding(text, [2]), _source(text))
        assert where == "line 5: already marked dynamic: each of `cache.layers`", where
    # A loop that marks another dim, or another list, does not hold them.
    finding = _loop_finding(DECODE, [1])
    assert RULES["RF001"].already_present(finding, _source(DECODE)) is None
    assert finding.params["loops"]
    other = DECODE.replace("in cache.layers", "in cache.other")
    assert RULES["RF001"].already_present(_loop_finding(other, [2]), _source(other)) is None


def _span(text: str, code: str) -> list[int]:
    start = text.index(code)
    return [start, start + len(code)]


def test_rf002_and_rf003_recognise_a_tensor_already_passed():
    text = "import torch\n\nfn(x, torch.tensor(alpha, dtype=torch.float64))\n"
    rf002 = Finding(
        "RF002",
        "program.py",
        Location("program.py", 3),
        "wrap",
        Safety.SAFE,
        params={"arg": _span(text, "torch.tensor(alpha, dtype=torch.float64)"), "dtype": "float64", "param": "a"},
    )
    assert RULES["RF002"].already_present(rf002, _source(text)) == "line 3: `torch.tensor(alpha, dtype=torch.float64)`"
    rf002.params["arg"] = _span(text, "x")
    assert RULES["RF002"].already_present(rf002, _source(text)) is None

    text = "import torch as th\n\nopt = th.optim.SGD([{'params': a, 'lr': 0.1}, {'params': b, 'lr': th.tensor(0.2)}])\n"
    rf003 = Finding(
        "RF003",
        "program.py",
        Location("program.py", 3),
        "wrap",
        Safety.SAFE,
        params={"wrap": [_span(text, "0.1"), _span(text, "th.tensor(0.2)")], "default": None},
    )
    assert RULES["RF003"].already_present(rf003, _source(text)) is None
    assert rf003.params["wrap"] == [_span(text, "0.1")]  # narrowed to the lr still a float
    rf003.params["wrap"] = [_span(text, "th.tensor(0.2)")]
    assert RULES["RF003"].already_present(rf003, _source(text)) == "line 3: `th.tensor(0.2)`"


BLOCKS = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return x + torch.relu(self.lin(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(6)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


def test_rf004_region_already_there():
    rule = RULES["RF004"]
    (finding,) = rule.plan_static(_source(BLOCKS), "program.py")
    assert rule.already_present(finding, _source(BLOCKS)) is None
    text = BLOCKS.replace(
        "    def forward(self, x):\n        return x +",
        "    @torch.compiler.nested_compile_region\n    def forward(self, x):\n        return x +",
    )
    finding.params["line"] += 1  # the `def` moved down one line
    assert rule.already_present(finding, _source(text)) == "line 11: `forward` is already a nested_compile_region"


def test_static_mode_honours_the_profiles_training_fact():
    # The file alone shows no backward pass: static mode would call the region safe. The Profile
    # saw the program train (in another file): the same finding stays unsafe, as when it planned.
    rule = RULES["RF004"]
    (static,) = rule.plan_static(_source(BLOCKS), "program.py")
    static.confidence = "static"
    assert static.safety is Safety.SAFE
    profile = Profile(command=["python", "train.py"], torch_version="2.13.0", python_version="3.11", trains=True)
    (settled,), present = settle([static], ALL_RULES, profile=profile, source_of=lambda path: _source(BLOCKS))
    assert not present
    assert settled.safety is Safety.UNSAFE and any("the program trains" in n for n in settled.notes), settled.notes
    # Without the fact (an inference program, or an older Profile) it is what static mode says.
    profile.trains = False
    (settled,), _ = settle(
        [rule.plan_static(_source(BLOCKS), "program.py")[0]],
        ALL_RULES,
        profile=profile,
        source_of=lambda path: _source(BLOCKS),
    )
    assert settled.safety is Safety.SAFE


def test_rf005_graph_break_already_there():
    text = "import torch\n\n\ndef fn(x, n):\n    y = torch.sin(x)\n    torch._dynamo.graph_break()\n    return y * n\n"
    finding = Finding(
        "RF005",
        "program.py",
        Location("program.py", 7),
        "shield",
        Safety.UNSAFE,
        params={"function": "fn", "line": 7, "col": 4},
    )
    assert RULES["RF005"].already_present(finding, _source(text)) == "line 6: `torch._dynamo.graph_break()`"
    finding.params["line"] = 5
    assert RULES["RF005"].already_present(finding, _source(text)) is None


def test_rf006_config_already_set():
    statement = "torch.compiler.config.dynamic_sources = \"L['self'].n\""
    text = f"import torch\n\n{statement}\n"
    finding = Finding(
        "RF006",
        "program.py",
        Location("program.py", 3),
        "config",
        Safety.SAFE,
        params={"config": statement, "at": len("import torch\n")},
    )
    assert RULES["RF006"].already_present(finding, _source(text)) == f"line 3: `{statement}`"
    assert RULES["RF006"].already_present(finding, _source("import torch\n")) is None


class InsertLine(Rule):
    """Test only: inserts `x = 1` before line 2."""

    id = "RF998"

    def fix(self, finding, source, torch_name):
        at = source.offset(2, 0)
        return [Edit(finding.file, at, at, "x = 1\n", self.id)]


def test_the_default_recognises_a_rules_own_insertion():
    finding = Finding("RF998", "program.py", Location("program.py", 2), "insert", Safety.SAFE)
    assert InsertLine().already_present(finding, _source("import torch\nx = 1\n")) == "line 2: `x = 1`"
    assert InsertLine().already_present(finding, _source("x = 1\nimport torch\n")) == "line 1: `x = 1`"
    assert InsertLine().already_present(finding, _source("import torch\ny = 1\n")) is None


def test_every_rule_says_what_of_its_fix_is_already_there():
    # The generic mechanism, with each rule's own override: the default (the rule's edits made
    # again) cannot see a hand-written equivalent, nor a value already wrapped.
    # RF008-RF010 (issue 15) rely on the default so far: their fixes have no common hand-written
    # spelling, and a re-profile of fixed code no longer shows what they fix.
    overriding = {rule.id for rule in ALL_RULES if type(rule).already_present is not Rule.already_present}
    assert {"RF001", "RF002", "RF003", "RF004", "RF005", "RF006"} <= overriding
