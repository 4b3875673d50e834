"""The recompile-reason registry: every reason kind the parser types has a stable ID and a page
(docs/reasons/ID.md, generated: ``pytest tests/test_reason_docs.py --update-golden`` rewrites
them), `recompile-fix reasons` prints them, and the JSON and SARIF outputs carry the IDs."""

import gzip
import json
import re
import shutil

from click.testing import CliRunner

from conftest import ROOT, run_cli
from recompile_fix.cli import main
from recompile_fix.profile.model import REASON_KINDS
from recompile_fix.profile.reason_classes import REASON_CLASSES, reason_class, reason_id
from recompile_fix.profile.reasons import parse_reasons
from recompile_fix.reason_docs import fixed_by, reason_page, reason_pages, write_reason_pages
from recompile_fix.rules import ALL_RULES
from test_reasons import OLDER, REAL_213

DOCS = ROOT / "docs" / "reasons"


def test_reason_pages_are_generated_from_the_registry(request):
    if request.config.getoption("--update-golden"):
        write_reason_pages(DOCS, ALL_RULES)
    expected = reason_pages(ALL_RULES)
    on_disk = {path.name: path.read_text(encoding="utf-8") for path in DOCS.iterdir()}
    assert sorted(on_disk) == sorted(expected), "run `pytest tests/test_reason_docs.py --update-golden`"
    stale = [name for name in expected if on_disk[name] != expected[name]]
    assert not stale, f"{stale} out of date: run `pytest tests/test_reason_docs.py --update-golden`"


def test_every_kind_has_one_stable_id_and_a_page():
    assert [c.kind for c in REASON_CLASSES] == list(REASON_KINDS)  # a new kind takes the next ID
    assert [c.id for c in REASON_CLASSES] == [f"RC{i:03d}" for i in range(1, len(REASON_CLASSES) + 1)]
    for entry in REASON_CLASSES:
        page = (DOCS / f"{entry.id}.md").read_text(encoding="utf-8")
        for section in ("## What torch guarded", "## Example", "## What torch says", "## Rules that fix it"):
            assert section in page, (entry.id, section)
        assert reason_class(entry.kind) is entry and reason_class(entry.id.lower()) is entry


def _typed_texts():
    """Every guard text the tests hold: torch 2.13's real strings, the older spellings, and the
    release fixtures' recorded runs (2.6 to 2.15)."""
    texts = [p.values[0] for p in REAL_213] + [p.values[0] for p in OLDER]
    for part in (ROOT / "tests" / "fixtures").glob("torch-*/*/*/raw/*.json"):
        texts.extend(re.findall(r'"((?:\d+/\d+): [^"]*)"', part.read_text(encoding="utf-8")))
    for log in (ROOT / "tests" / "fixtures").glob("torch-*/*/*/recompiles.log.gz"):
        texts.extend(
            re.findall(r"triggered by the following guard failure\(s\):\n\s*- (.+)", gzip.open(log, "rt").read())
        )
    return texts


def test_every_typed_reason_maps_to_an_id_with_a_page():
    kinds = {reason.kind for text in _typed_texts() for reason in parse_reasons(text)}
    assert len(kinds) >= 15, kinds  # the corpus holds most kinds: the test would be vacuous otherwise
    for kind in kinds:
        assert (DOCS / f"{reason_id(kind)}.md").is_file(), kind


def test_pages_name_the_rules_that_consume_the_kind():
    scalar = reason_class("scalar_value")
    assert {r.id for r in fixed_by(scalar, ALL_RULES)} >= {"RF002", "RF006"}
    assert "RF011" not in {r.id for r in fixed_by(reason_class("limit_hit"), ALL_RULES)}  # finding only
    assert "[RF002](../rules/RF002.md)" in reason_page(scalar, ALL_RULES)
    assert "No rule fixes it" in reason_page(reason_class("rank_mismatch"), ALL_RULES)


def test_the_reasons_command_lists_and_prints_them():
    listed = CliRunner().invoke(main, ["reasons"])
    assert listed.exit_code == 0 and len(listed.output.splitlines()) == len(REASON_CLASSES)
    one = CliRunner().invoke(main, ["reasons", "RC009"])
    assert one.exit_code == 0 and one.output == reason_page(reason_class("RC009"), ALL_RULES)
    assert run_cli("reasons", "RC999").returncode == 2


def test_json_and_sarif_carry_the_reason_ids(tmp_path):
    case = ROOT / "golden" / "RF002" / "two_annealed_scalars"
    shutil.copy(case / "program.in.py", tmp_path / "program.py")
    shutil.copy(case / "profile.json", tmp_path / "profile.json")
    findings = json.loads(
        run_cli("apply", ".", "--profile", "profile.json", "--check", "--output-format", "json", cwd=tmp_path).stdout
    )
    ids = {r["id"] for f in findings if f["code"] == "RF002" for r in f["reasons"]}
    assert ids == {"RC009"}
    assert all(r["url"].endswith(f"/docs/reasons/{r['id']}.md") for f in findings for r in f["reasons"])
    sarif = json.loads(
        run_cli("apply", ".", "--profile", "profile.json", "--check", "--output-format", "sarif", cwd=tmp_path).stdout
    )
    assert {r["id"] for res in sarif["runs"][0]["results"] for r in res["properties"]["reasons"]} == {"RC009"}
    report = json.loads(run_cli("report", "profile.json", "--json", cwd=tmp_path, check=0).stdout)
    grouped = [r for frame in report["frames"] for r in frame["reasons"]]
    assert grouped and {r["id"] for r in grouped} == {"RC009"}
