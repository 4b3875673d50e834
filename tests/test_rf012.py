"""RF012 stable-key-set: the rule's decisions on the golden cases' recorded Profiles (no torch
run), with the program edited line for line where a test needs another reading of the dict."""

from pathlib import Path

import pytest

from conftest import run_cli
from golden_cases import GOLDEN, stage_case
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.findings.finding import Safety
from recompile_fix.profile.model import Profile
from recompile_fix.rules import rule_by_id
from recompile_fix.rules.rf012_stable_key_set.key_uses import key_of, read_only_by_get

RULE = rule_by_id("RF012")


def _stage(tmp_path: Path, case: str, old: str = "", new: str = "") -> Path:
    return stage_case(GOLDEN / "RF012" / case, tmp_path, old, new)


def _findings(work: Path):
    profile = Profile.load(work / "profile.json")
    return RULE.plan(profile, Project(work, expected_hashes=profile.sources))


def test_a_key_that_comes_and_goes_carrying_none_is_passed_always(tmp_path):
    [finding] = _findings(_stage(tmp_path, "stable_key_set"))
    assert finding.safety is Safety.SAFE and finding.params["keys"] == ["max_seqlen", "padding"]  # torch named one
    assert "gains and loses `max_seqlen`, `padding`" in finding.message


def test_a_key_read_otherwise_than_by_get_makes_the_fix_unproven(tmp_path):
    work = _stage(
        tmp_path,
        "stable_key_set",
        'if kwargs.get("padding") is not None:',
        'if "padding" in kwargs and kwargs["padding"] is not None:',
    )
    [finding] = _findings(work)
    assert finding.safety is Safety.UNSAFE and "tested with `in`" in " ".join(finding.notes)


def test_a_key_that_carries_a_tensor_gets_no_fix_and_why(tmp_path):
    [finding] = _findings(_stage(tmp_path, "key_with_a_tensor"))
    assert finding.safety is Safety.NONE and "carried a value" in finding.notes[0]


def test_apply_writes_the_keys_once(tmp_path):
    work = _stage(tmp_path, "stable_key_set")
    run_cli("apply", ".", "--profile", "profile.json", cwd=work, check=0)
    text = (work / "program.py").read_text()
    assert text == (GOLDEN / "RF012" / "stable_key_set" / "program.out.py").read_text()
    run_cli("apply", ".", "--profile", "profile.json", cwd=work, check=0)
    assert (work / "program.py").read_text() == text


@pytest.mark.parametrize(
    "source, want",
    [
        ("kwargs['padding']", ("kwargs", "padding")),
        ('opts["mask"]', ("opts", "mask")),
        ("kwargs", None),
        ("x.mask", None),
    ],
)
def test_key_of(source, want):
    assert key_of(source) == want


@pytest.mark.parametrize(
    "body, why",
    [
        ('return kwargs.get("padding")', None),
        ('return kwargs.get("padding", None), kwargs["cond"]', None),
        ('return kwargs.get("padding", 1.0)', "default other than None"),
        ("return inner(**kwargs)", "whole"),
        ("return len(kwargs)", "whole"),
        ('return kwargs.pop("padding", None)', "kwargs.pop"),
        ("return kwargs.get(name)", "no string literal"),
    ],
)
def test_reads_only_by_get(body, why):
    source = SourceFile.parse(Path("m.py"), f"def forward(x, **kwargs):\n    {body}\n")
    func = source.function_def(1, "forward")
    got = read_only_by_get(source, func, "kwargs", {"padding"})
    assert (got is None) if why is None else (why in got)


@pytest.mark.parametrize(
    "guard, want",
    [
        ("0/0: not ___dict_contains('gate', kwargs)  # if kwargs.get('gate')", ("kwargs", "gate")),
        ("0/0: len(kwargs) == 1  # return self.mlp(x, **kwargs)", ("kwargs", "")),
        ("0/0: not kwargs                      # return x + self.mlp(self.norm(x), **kwargs)", ("kwargs", "")),
        ("0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4", None),
    ],
)
def test_the_guards_on_a_dicts_key_set(guard, want):
    from profiles import reasons_of
    from recompile_fix.rules.rf012_stable_key_set.rule import _dict_guard

    [reason] = reasons_of([guard])
    assert _dict_guard(reason) == want


def test_a_dict_passed_on_gets_the_fix_as_unsafe(tmp_path):
    [finding] = _findings(_stage(tmp_path, "forwarded_kwargs"))
    assert finding.safety is Safety.UNSAFE and finding.params["keys"] == ["gate"]
    assert "whole" in " ".join(finding.notes)  # `**kwargs` handed on
