"""Every rule writes only what the torch it fixes for runs: each rule declares the torch APIs its
fixes write (``Rule.emits``, with the first release that has each), its own gates read those
declarations, the rewrite refuses an edit naming an API the Finding's release lacks, and
docs/torch-releases.md is the table of those declarations."""

import re
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from golden_cases import CASES, case_id
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.rewrite import rewrite
from recompile_fix.findings.finding import Safety
from recompile_fix.findings.releases import RELEASES, check_edits, installed_torch_version, release_table
from recompile_fix.pipeline.fix import run_apply
from recompile_fix.profile.model import Profile, torch_release
from recompile_fix.rules import ALL_RULES, rule_by_id

TABLE = ROOT / "docs" / "torch-releases.md"
# torch.<dtype> and the like: constants every release has, not APIs a rule needs to declare.
_CONSTANTS = re.compile(r"^torch\.(?:float\d*|int\d+|bool|long|double|half|bfloat16|float64)$")
_TORCH_NAME = re.compile(r"\b(?:torch|th)(?:\.\w+)+")


def test_docs_table_is_what_the_rules_declare(request):
    table = release_table(ALL_RULES)
    if request.config.getoption("--update-golden"):
        TABLE.write_text(table)
    assert TABLE.read_text() == table, "run: pytest tests/test_releases.py --update-golden"


def test_every_api_a_fix_writes_is_declared():
    """The torch names each rule's examples add (before -> after) are in its ``emits``."""
    for rule in ALL_RULES:
        declared = {api.name for api in rule.emits}
        for example in rule.examples:
            if example.after is None:
                continue
            added = set(_TORCH_NAME.findall(example.after)) - set(_TORCH_NAME.findall(example.before))
            for name in added:
                name = re.sub(r"^th\.", "torch.", name)
                if _CONSTANTS.match(name):
                    continue
                assert any(name == d or name.startswith(d + ".") for d in declared), (rule.id, name)


def _boundaries(rules=ALL_RULES) -> list[str]:
    """One release on each side of every boundary ``rules`` declare, and the ends of the table."""
    releases = {RELEASES[0], RELEASES[-1]}
    for rule in rules:
        for api in rule.emits:
            if api.since is not None:
                releases |= {api.since, (api.since[0], api.since[1] - 1)}
    return [f"{major}.{minor}.0" for major, minor in sorted(releases)]


def _plan_on(spec, version: str, work: Path):
    work.mkdir()
    for file in spec.path.glob("*.py"):
        if file.name != "program.out.py":
            shutil.copy(file, work / ("program.py" if file.name == "program.in.py" else file.name))
    profile = Profile.load(spec.path / "profile.json")
    profile.torch_version = version
    return run_apply([str(work)], profile, ALL_RULES, root=str(work), unsafe_fixes=True, write=False, use_cache=False)


@pytest.mark.parametrize("spec", [c for c in CASES if c.changes], ids=case_id)
def test_golden_fixes_on_every_release_use_only_what_it_has(spec, tmp_path):
    """The golden case's Profile, as if recorded on each release: every fix written names only
    APIs that release has, and each rule gated itself (the rewrite's own check never had to).
    The releases are the table's ends and each side of the boundaries of the rules that find
    something at either end (a rule silent at both is silent between them)."""
    ends = [_boundaries(())[0], _boundaries(())[-1]]
    results = {version: _plan_on(spec, version, tmp_path / version) for version in ends}
    found = {finding.rule for result in results.values() for finding in result.findings}
    for version in _boundaries([rule for rule in ALL_RULES if rule.id in found]):
        result = results.get(version) or _plan_on(spec, version, tmp_path / version)
        assert not [e for e in result.errors if "not written" in e], (version, result.errors)
        release = torch_release(version)
        for file_rewrite in result.rewrites:
            written = "".join(edit.new_text for edit in file_rewrite.edits)
            for finding in file_rewrite.applied:
                rule = rule_by_id(finding.rule)
                assert finding.torch_version == version
                for api in rule.emits:
                    if api.use == "code" and api.in_text and api.pattern().search(written):
                        assert api.runs_on(release), (version, rule.id, api.name)


@pytest.mark.parametrize(
    "version, allowed",
    [("2.6.0", False), ("2.7.1", False), ("2.8.0", True), ("2.15.0+cu128", True), (None, False)],
)
def test_rewrite_refuses_an_api_the_release_lacks(version, allowed):
    rule = rule_by_id("RF004")
    for spelling in ("torch", "th"):
        edits = [Edit("m.py", 0, 0, f"@{spelling}.compiler.nested_compile_region\n", "RF004")]
        why = check_edits(rule, edits, version)
        assert (why is None) == allowed, why
        if why is not None:
            assert "torch.compiler.nested_compile_region" in why and "2.8" in why
    # Names every release has never block, whatever the version.
    assert check_edits(rule_by_id("RF001"), [Edit("m.py", 0, 0, "torch._dynamo.mark_dynamic(x, 0)\n")], None) is None


def test_a_static_finding_is_checked_against_the_installed_torch():
    """Static mode has no Profile: the release is the installed torch's."""
    path = ROOT / "golden" / "RF004" / "deep_blocks_module" / "program.in.py"
    source = SourceFile.read(Path("program.py"), path.read_bytes())
    rule = rule_by_id("RF004")
    (finding,) = [f for f in rule.plan_static(source, "program.py") if f.safety is not Safety.NONE]
    assert finding.torch_version is None and installed_torch_version().startswith("2.")
    assert rewrite("program.py", source, [finding], {rule.id: rule}).changed
    finding.torch_version = "2.6.0"  # as a Profile recorded on 2.6 would say
    refused = rewrite("program.py", source, [finding], {rule.id: rule})
    assert not refused.changed and "arrived in 2.8" in refused.skipped[0][1]


def test_rf006_writes_no_config_before_2_7(tmp_path):
    """torch 2.6 has neither dynamic_sources nor allow_unspec_int_on_nn_module (setting the
    latter raises AttributeError there): the counter that needs a config gets no edit."""
    case = ROOT / "golden" / "RF006" / "counter_in_branch"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    for version, config in [("2.6.0", None), ("2.7.0", "dynamic_sources"), ("2.13.0", "dynamic_sources")]:
        profile = Profile.load(case / "profile.json")
        profile.torch_version = version
        result = run_apply(
            [str(tmp_path)],
            profile,
            (rule_by_id("RF006"),),
            root=str(tmp_path),
            unsafe_fixes=True,
            write=False,
            use_cache=False,
        )
        assert result.findings, version
        text = " ".join(n for f in result.findings for n in f.notes) + "".join(r.after for r in result.rewrites)
        assert "allow_unspec_int_on_nn_module = True" not in text
        if config is None:
            assert all(f.safety is Safety.NONE for f in result.findings) and not result.rewrites, version
            assert "arrived in 2.7" in text
        else:
            assert any(config in r.after for r in result.rewrites), (version, text)


SMALL_SIZES = """\
import torch


@torch.compile
def fn(x):
    return torch.relu(x) * 2


for n in (1, 4):
    fn(torch.ones(n))
"""


@pytest.mark.parametrize("version, mentions", [("2.6.0", False), ("2.8.0", True), ("2.13.0", True)])
def test_rf001_suggests_backed_size_oblivious_only_where_it_exists(version, mentions, tmp_path):
    from recompile_fix.analysis.project import Project
    from recompile_fix.findings.plan import plan
    from recompile_fix.profile.model import Location, Reason, sha256_file

    (tmp_path / "program.py").write_text(SMALL_SIZES)
    frame = _frame_with_sizes([1, 4])
    frame.file, frame.first_line, frame.name = "program.py", 5, "fn"
    for c in frame.compiles:
        c.stack = [Location("program.py", 10, 10, 4, 21, "<module>")]
    frame.compiles[1].reasons = [
        Reason(
            kind="size_mismatch",
            text="tensor 'x' size mismatch at index 0. expected 1, actual 4",
            source="x",
            dim=0,
            expected=1,
            actual=4,
            entry="0/0",
        )
    ]
    profile = Profile(command=["python", "program.py"], torch_version=version, python_version="3.11", frames=[frame])
    profile.sources = {"program.py": sha256_file(tmp_path / "program.py")}
    (finding,) = plan(profile, Project(tmp_path, profile.sources), (rule_by_id("RF001"),))
    text = " ".join(finding.notes)
    assert "0/1 specialisation" in text, text
    assert ("backed_size_oblivious" in text) == mentions, text
    assert "mark_unbacked" in text  # torch >= 2.4 in every release here


def _frame_with_sizes(sizes):
    from recompile_fix.profile.model import Compile, Frame

    frame = Frame(file="m.py", first_line=1, name="f")
    for i, size in enumerate(sizes):
        frame.compiles.append(
            Compile(id=f"0/{i}", inputs={"x": {"type": "Tensor", "shape": [size], "stride": [1], "dtype": "float32"}})
        )
    return frame
