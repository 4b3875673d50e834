"""Static mode over many files: the prefilter skips files without a rule's trigger, the cache
makes an unchanged re-run parse nothing, and content (not mtime) decides what is stale."""

import errno
import os

import libcst as cst

from conftest import ROOT
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.pipeline.paths import discover
from recompile_fix.pipeline.scan import CACHE_FILE, StaticScan
from recompile_fix.profile.model import Location


class PrintInForward(Rule):
    """A test-only static rule: flags `print(` calls."""

    id = "RF900"
    name = "test-print"
    triggers = ("print(",)
    parsed: list[str] = []

    def plan_static(self, source, path):
        PrintInForward.parsed.append(path)
        return [
            Finding(
                rule=self.id,
                file=path,
                location=Location(path, source.positions[n].start.line),
                message="print",
                safety=Safety.SAFE,
                confidence="static",
            )
            for n in source.nodes(cst.Call)
            if isinstance(n.func, cst.Name) and n.func.value == "print"
        ]


def _tree(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\nprint(x)\n")
    (tmp_path / "pkg" / "b.py").write_text("y = 2\n")  # no trigger: never parsed
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "c.py").write_text("print(3)\n")  # excluded by default
    return tmp_path


def _scan(root):
    from recompile_fix.config import Config

    config = Config(root=root)
    scan = StaticScan(root, [PrintInForward()], config.fingerprint(), jobs=1)
    PrintInForward.parsed = []
    findings = scan.run(discover([str(root)], root, config.excluded), progress=False)
    return scan, findings


def test_prefilter_exclude_and_cache(tmp_path):
    root = _tree(tmp_path)
    scan, findings = _scan(root)
    assert [(f.file, f.location.line) for f in findings] == [(os.path.join("pkg", "a.py"), 2)]
    assert PrintInForward.parsed == [os.path.join("pkg", "a.py")]  # b.py has no trigger, .venv excluded

    scan, findings = _scan(root)  # unchanged tree: nothing parsed, same findings
    assert scan.parsed == 0 and PrintInForward.parsed == [] and len(findings) == 1

    a = root / "pkg" / "a.py"
    os.utime(a, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns + 10**9))  # touched, same content
    scan, findings = _scan(root)
    assert PrintInForward.parsed == [] and len(findings) == 1

    a.write_text("print(1)\nprint(2)\n")  # changed content
    scan, findings = _scan(root)
    assert PrintInForward.parsed == [os.path.join("pkg", "a.py")] and len(findings) == 2


def test_the_cache_folder_is_ignored_by_git(tmp_path):
    """The docs say to commit `.recompile-fix/` for CI (the Profile, the profiled texts); the
    cache beside them is this machine's, and one `apply` trusted would let a commit choose its
    edits: its folder ignores itself, as pytest's and ruff's do."""
    import subprocess

    root = _tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    _scan(root)
    assert (root / CACHE_FILE).is_file()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert "pkg/a.py" in status and ".recompile-fix" not in status, status


def test_a_same_size_edit_with_its_mtime_restored_is_scanned_again(tmp_path):
    # The cache was keyed by (mtime, size): such an edit reused the old findings, and `apply`
    # placed them by line numbers that no longer held.
    root = _tree(tmp_path)
    a = root / "pkg" / "a.py"
    a.write_text("print(1)\nx = 22222\n")
    _scan(root)
    stamp = a.stat()
    a.write_text("x = 22222\nprint(1)\n")  # same size, the print moved
    os.utime(a, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    scan, findings = _scan(root)
    assert scan.parsed == 1 and [f.location.line for f in findings] == [2]


def test_a_damaged_or_unwritable_cache_is_only_slower(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    _scan(root)
    cache = root / CACHE_FILE
    for damaged in ("[1, 2]", '{"key": 1}', "{", '{"files": [], "key": null}'):
        cache.write_text(damaged)
        scan, findings = _scan(root)
        assert PrintInForward.parsed == [os.path.join("pkg", "a.py")] and len(findings) == 1
    # A full disk while the cache is written (it raised a traceback): the scan's result stands,
    # the old cache stays whole and no temp file is left.
    kept = cache.read_bytes()
    import json as json_module

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(json_module, "dump", full)
    (root / "pkg" / "a.py").write_text("print(3)\n")
    scan, findings = _scan(root)
    assert len(findings) == 1 and cache.read_bytes() == kept
    assert [p.name for p in cache.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_progress_only_when_asked(tmp_path, capsys):
    root = _tree(tmp_path)
    from recompile_fix.config import Config

    config = Config(root=root)
    StaticScan(root, [PrintInForward()], config.fingerprint(), jobs=1, use_cache=False).run(
        discover([str(root)], root, config.excluded), progress=True
    )
    assert "scanned" in capsys.readouterr().err


def test_pre_commit_hooks_file():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "id: recompile-fix-check" in text and "entry: recompile-fix apply --check --output-format concise" in text
    assert "id: recompile-fix\n" in text and "entry: recompile-fix apply --output-format concise\n" in text


class PrintAfterImport(PrintInForward):
    """Fires only where the file also imports something (``requires``)."""

    id = "RF901"
    requires = ("import ",)


def test_requires_every_substring(tmp_path):
    from recompile_fix.config import Config

    (tmp_path / "a.py").write_text("print(1)\n")  # a trigger, but not the required `import `
    (tmp_path / "b.py").write_text("import os\nprint(os.sep)\n")
    config = Config(root=tmp_path)
    PrintInForward.parsed = []
    findings = StaticScan(tmp_path, [PrintAfterImport()], config.fingerprint(), jobs=1, use_cache=False).run(
        discover([str(tmp_path)], tmp_path, config.excluded), progress=False
    )
    assert PrintInForward.parsed == ["b.py"] and [f.file for f in findings] == ["b.py"]


def test_rf003_static_needs_a_scheduler_and_a_compile():
    from recompile_fix.rules import rule_by_id

    rf003 = rule_by_id("RF003")
    assert not rf003.may_fire(b"import torch\nopt = torch.optim.Adam(m.parameters(), lr=0.1)\n")
    assert rf003.may_fire(
        b"import torch\nopt = torch.optim.Adam(m.parameters(), lr=0.1)\n"
        b"s = torch.optim.lr_scheduler.StepLR(opt, 1)\nstep = torch.compile(opt.step)\n"
    )


def test_a_file_that_does_not_parse_is_reported_and_others_still_scanned(tmp_path):
    from recompile_fix.config import Config

    (tmp_path / "bad.py").write_text("print(1\n")  # a trigger, and a syntax error
    (tmp_path / "good.py").write_text("print(2)\n")
    config = Config(root=tmp_path)
    scan = StaticScan(tmp_path, [PrintInForward()], config.fingerprint(), jobs=1, use_cache=False)
    findings = scan.run(discover([str(tmp_path)], tmp_path, config.excluded), progress=False)
    assert [f.file for f in findings] == ["good.py"]
    assert len(scan.errors) == 1 and scan.errors[0].startswith("bad.py:") and "does not parse" in scan.errors[0]


def test_the_cache_does_not_outlive_the_code_that_filled_it(tmp_path, monkeypatch):
    import recompile_fix.pipeline.scan as scan_module

    root = _tree(tmp_path)
    _scan(root)
    scan, _ = _scan(root)
    assert scan.parsed == 0
    monkeypatch.setattr(scan_module, "code_digest", lambda: "edited")  # e.g. an editable install changed
    scan, findings = _scan(root)
    assert PrintInForward.parsed == [os.path.join("pkg", "a.py")] and len(findings) == 1


def test_what_git_ignores_is_not_scanned_unless_named(tmp_path):
    """As ruff: in a git work tree, files git ignores (copies in an ignored `work/`) are left out
    of a folder's scan; a file named on the command line is scanned all the same; tracked files
    are never ignored; outside a work tree nothing is."""
    import subprocess

    for rel in ("src/model.py", "work/copy/model.py", "build.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("work/\nbuild.py\n")
    every = sorted(str(p.relative_to(tmp_path)) for p in discover([str(tmp_path)], tmp_path, lambda _: False))
    assert every == ["build.py", "src/model.py", "work/copy/model.py"]  # not a work tree yet
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    found = sorted(str(p.relative_to(tmp_path)) for p in discover([str(tmp_path)], tmp_path, lambda _: False))
    assert found == ["src/model.py"]
    named = discover([str(tmp_path / "work" / "copy" / "model.py")], tmp_path, lambda _: False)
    assert named == [tmp_path / "work" / "copy" / "model.py"]
    subprocess.run(["git", "-C", str(tmp_path), "add", "-f", "build.py"], check=True)
    tracked = sorted(str(p.relative_to(tmp_path)) for p in discover([str(tmp_path)], tmp_path, lambda _: False))
    assert tracked == ["build.py", "src/model.py"]


def test_outside_a_work_tree_git_is_not_asked(tmp_path, monkeypatch):
    """No `.git` in the folder or above it, and none named by GIT_DIR: git would answer "not a
    work tree", so it is not started; with one, it is."""
    import subprocess

    from recompile_fix.pipeline import paths

    started, run = [], subprocess.run
    monkeypatch.setattr(paths.subprocess, "run", lambda *a, **k: started.append(a) or run(*a, **k))
    (tmp_path / "model.py").write_text("x = 1\n")
    assert paths.git_ignored(tmp_path, [tmp_path / "model.py"]) == set() and started == []
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    assert paths.git_ignored(tmp_path, [tmp_path / "model.py"]) == set() and len(started) == 1
    monkeypatch.delenv("GIT_DIR")
    (tmp_path / ".git").write_text("gitdir: /nowhere\n")  # a worktree's or submodule's file
    paths.git_ignored(tmp_path / "sub", [tmp_path / "model.py"])
    assert len(started) == 2


def test_the_scan_bench_reads_what_apply_writes(tmp_path):
    """bench/scan_throughput.py counts the findings of the JSON output (so a fast run is seen to
    have done the work): it read the rows by a key they had lost, and nothing ran it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("scan_throughput", ROOT / "bench" / "scan_throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (tmp_path / "models").mkdir()
    program = ROOT / "golden" / "RF004" / "sequential_blocks" / "program.in.py"
    (tmp_path / "models" / "model.py").write_text(program.read_text())
    seconds, found = bench.run_ours(tmp_path, 1, as_json=True)
    assert seconds > 0 and found.startswith("RF004 "), found


def _settled(monkeypatch, *files):
    """Statuses recorded at once (no settling margin), with each file's ctime a clock tick behind."""
    import time

    import recompile_fix.pipeline.scan as scan_module

    monkeypatch.setattr(scan_module, "_SETTLED_NS", 0)
    time.sleep(0.05)  # past a coarse clock's tick: a later write gets another ctime
    return files


def test_a_warm_run_reads_no_file_whose_status_is_recorded(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    _settled(monkeypatch)
    scan, _ = _scan(root)
    assert scan.read == 2  # a.py and b.py, read and hashed once
    scan, findings = _scan(root)
    assert (scan.read, scan.parsed, len(findings)) == (0, 0, 1)


def test_a_same_size_edit_with_its_mtime_restored_is_read_again_though_its_status_was_recorded(tmp_path, monkeypatch):
    # ctime, which no program sets back, tells the edit apart where size and mtime do not.
    root = _tree(tmp_path)
    a = root / "pkg" / "a.py"
    a.write_text("print(1)\nx = 22222\n")
    _settled(monkeypatch)
    _scan(root)
    stamp = a.stat()
    a.write_text("x = 22222\nprint(1)\n")
    os.utime(a, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    scan, findings = _scan(root)
    assert (scan.read, scan.parsed) == (1, 1) and [f.location.line for f in findings] == [2]


def test_a_file_written_just_now_has_no_status_recorded(tmp_path):
    # Another write within the same clock tick would leave its times as they were: such a file is
    # read and hashed on every run until it has settled, and parsed only when its bytes changed.
    root = _tree(tmp_path)
    _scan(root)
    scan, findings = _scan(root)
    assert (scan.read, scan.parsed, len(findings)) == (2, 0, 1)
