"""A warm run parses nothing: after one `apply --check` over a tree, the next one over the same
bytes answers `settle`, each Finding's own fix (JSON, SARIF) and each file's rewrite from the
derived cache (pipeline/memo.py), as the static scan answers from its own. Counted in parses,
not seconds (bench/scan_throughput.py times it)."""

import ast
import json
import shutil
import subprocess
import sys

import libcst
import pytest
from click.testing import CliRunner

from conftest import ROOT
from recompile_fix.cli import main
from recompile_fix.pipeline.memo import DERIVED_CACHE_FILE


class _Parses:
    def __init__(self, monkeypatch):
        self.count = 0
        self.trees = 0  # libcst's alone: the parse that loads libcst and costs 100 ms a file
        real_ast, real_cst = ast.parse, libcst.parse_module

        def counted_ast(*args, **kwargs):
            self.count += 1
            return real_ast(*args, **kwargs)

        def counted_cst(*args, **kwargs):
            self.count += 1
            self.trees += 1
            return real_cst(*args, **kwargs)

        monkeypatch.setattr(ast, "parse", counted_ast)
        monkeypatch.setattr(libcst, "parse_module", counted_cst)


def _project(tmp_path):
    for name in ("deep_blocks.py", "lr_scheduler.py", "train_generate.py", "growing_shape.py"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    return tmp_path


def _apply(root, monkeypatch, *args):
    monkeypatch.chdir(root)
    return CliRunner().invoke(main, ["apply", ".", "-j", "1", *args])


@pytest.mark.parametrize(
    "args",
    [
        ("--check",),
        ("--check", "--unsafe-fixes"),
        ("--check", "--output-format", "json"),
        ("--check", "--output-format", "sarif", "--unsafe-fixes"),
        ("--diff", "--unsafe-fixes"),
    ],
)
def test_a_warm_run_parses_no_file_and_says_the_same(tmp_path, monkeypatch, args):
    root = _project(tmp_path)
    cold = _apply(root, monkeypatch, *args)
    assert cold.exit_code == 1, cold.output  # fixes pending: the run did the work
    parses = _Parses(monkeypatch)
    warm = _apply(root, monkeypatch, *args)
    assert (warm.exit_code, warm.output) == (cold.exit_code, cold.output)
    assert parses.count == 0


def test_an_edited_file_is_parsed_again_and_its_old_answers_dropped(tmp_path, monkeypatch):
    root = _project(tmp_path)
    first = _apply(root, monkeypatch, "--check", "--output-format", "json")
    entries = json.loads((root / DERIVED_CACHE_FILE).read_text())["entries"]
    assert {e["file"] for e in entries.values()} >= {"lr_scheduler.py", "train_generate.py"}
    lr = root / "lr_scheduler.py"
    lr.write_text("# the lr stays a float\n" + lr.read_text())
    parses = _Parses(monkeypatch)
    second = _apply(root, monkeypatch, "--check", "--output-format", "json")
    assert parses.count > 0  # the edited file, and only its answers, are derived again
    moved = {f["filename"]: f["location"]["row"] for f in json.loads(second.stdout)}
    before = {f["filename"]: f["location"]["row"] for f in json.loads(first.stdout)}
    assert moved["lr_scheduler.py"] == before["lr_scheduler.py"] + 1
    assert moved["train_generate.py"] == before["train_generate.py"]
    digests = {e["digest"] for e in json.loads((root / DERIVED_CACHE_FILE).read_text())["entries"].values()}
    old = {e["digest"] for e in entries.values() if e["file"] == "lr_scheduler.py"}
    assert not old & digests  # the old bytes' answers are gone


def test_no_cache_derives_everything_again(tmp_path, monkeypatch):
    root = _project(tmp_path)
    _apply(root, monkeypatch, "--check")
    parses = _Parses(monkeypatch)
    _apply(root, monkeypatch, "--check", "--no-cache")
    assert parses.count > 0


def test_a_damaged_cache_is_started_over(tmp_path, monkeypatch):
    root = _project(tmp_path)
    cold = _apply(root, monkeypatch, "--check")
    cache = root / DERIVED_CACHE_FILE
    data = json.loads(cache.read_text())
    data["entries"] = {"x": {"no": "file"}, **{k: 7 for k in list(data["entries"])[:2]}}
    cache.write_text(json.dumps(data))
    again = _apply(root, monkeypatch, "--check")
    assert (again.exit_code, again.output) == (cold.exit_code, cold.output)


def test_a_warm_run_does_not_import_libcst(tmp_path):
    """What a small project waits for is mostly imports: a warm `apply --check` (a process, as a
    user runs it) answers from the caches and never loads libcst (bench/editor_startup.py times it)."""
    root = _project(tmp_path)
    command = [sys.executable, "-X", "importtime", "-m", "recompile_fix", "apply", "--check", "."]
    cold = subprocess.run(command, cwd=root, capture_output=True, text=True)
    warm = subprocess.run(command, cwd=root, capture_output=True, text=True)
    assert cold.returncode == warm.returncode == 1, warm.stderr[-2000:]
    assert warm.stdout == cold.stdout
    assert "libcst._nodes" in cold.stderr  # the cold run parsed: the probe sees the import
    assert "libcst" not in warm.stderr


def _profiled(tmp_path):
    for name in ("main.py", "helpers.py"):
        shutil.copy(ROOT / "tests" / "programs" / "two_files" / name, tmp_path / name)
    (tmp_path / ".recompile-fix").mkdir()
    shutil.copy(
        ROOT / "tests" / "programs" / "two_files" / "profile.json", tmp_path / ".recompile-fix" / "profile.json"
    )
    return tmp_path


def test_a_warm_run_with_a_profile_parses_no_file_and_says_the_same(tmp_path, monkeypatch):
    """What the rules found from the Profile is kept too (pipeline/find.py: the plan), with the
    bytes of every file they read: `report` and `apply --check` over the same files build no
    tree. (Checking the Profile against the files still reads them with `ast`: about a
    millisecond a file, and what keeps a damaged or stale Profile from being used.)"""
    root = _profiled(tmp_path)
    monkeypatch.chdir(root)
    cold = [CliRunner().invoke(main, ["report"]), _apply(root, monkeypatch, "--check", "--output-format", "json")]
    assert json.loads(cold[1].stdout)  # findings from the Profile: the plan did the work
    parses = _Parses(monkeypatch)
    warm = [CliRunner().invoke(main, ["report"]), _apply(root, monkeypatch, "--check", "--output-format", "json")]
    assert [(r.exit_code, r.output) for r in warm] == [(r.exit_code, r.output) for r in cold]
    assert parses.trees == 0


@pytest.mark.parametrize(
    "edit",
    [
        ("helpers.py", "# a comment the Profile never saw\n"),  # a profiled file: stale now
        ("main.py", "\n# moved down\n"),
        ("helpers.py", ""),  # the same bytes: nothing changes
    ],
)
def test_the_remembered_plan_answers_as_a_run_without_the_cache_does(tmp_path, monkeypatch, edit):
    root = _profiled(tmp_path)
    _apply(root, monkeypatch, "--check", "--output-format", "json")  # remembered
    name, prefix = edit
    (root / name).write_text(prefix + (root / name).read_text())
    warm = _apply(root, monkeypatch, "--check", "--output-format", "json")
    fresh = _apply(root, monkeypatch, "--check", "--output-format", "json", "--no-cache")
    assert (warm.exit_code, warm.output) == (fresh.exit_code, fresh.output)


def test_a_warm_run_reads_no_training_script(tmp_path, monkeypatch):
    """RF004 asks whether a file of the project trains through the blocks (a `train.py` beside
    the model): the static scan keeps what each file says to that search, so a warm run reads
    neither it nor any other file the scan saw settled."""
    import time

    import recompile_fix.pipeline.find as find_module
    import recompile_fix.pipeline.scan as scan_module

    root = _project(tmp_path)
    (root / "train.py").write_text(
        "import torch\nfrom deep_blocks import DeepModel\nDeepModel()(torch.randn(2, 4, 16)).sum().backward()\n"
    )
    monkeypatch.setattr(scan_module, "_SETTLED_NS", 0)
    time.sleep(0.05)
    cold = _apply(root, monkeypatch, "--check", "--output-format", "concise")
    assert "deep_blocks.py" in cold.output and "RF004 [unsafe fix]" in cold.output, cold.output
    read: list[str] = []
    real_named, real_bounded = find_module.read_named_file, scan_module.read_bounded
    monkeypatch.setattr(
        find_module, "read_named_file", lambda path, *a, **k: read.append(str(path)) or real_named(path, *a, **k)
    )
    monkeypatch.setattr(
        scan_module, "read_bounded", lambda path, *a, **k: read.append(str(path)) or real_bounded(path, *a, **k)
    )
    warm = _apply(root, monkeypatch, "--check", "--output-format", "concise")
    assert (warm.exit_code, warm.output) == (cold.exit_code, cold.output)
    assert not [p for p in read if p.endswith("train.py")], read
