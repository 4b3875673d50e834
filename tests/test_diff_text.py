"""The diff `apply --diff` prints is one `patch` and `git apply` read: a file whose last line has no
line break gets git's marker, not its last line run into the summary that follows (a trial)."""

import subprocess

from recompile_fix.edits.edit import unified_diff


def test_a_last_line_without_a_break_is_marked():
    diff = unified_diff("prog.py", "x = 1\nf(x)", "x = 1\ny = x\nf(y)")
    assert diff.endswith("+f(y)\n\\ No newline at end of file\n")
    assert "-f(x)\n\\ No newline at end of file\n" in diff
    assert unified_diff("p.py", "a\n", "b\n").endswith("+b\n")


def test_git_applies_it(tmp_path):
    before, after = "import torch\nf(torch.ones(3))", "import torch\nx = torch.ones(3)\nf(x)"
    (tmp_path / "prog.py").write_text(before)
    (tmp_path / "fix.patch").write_text(unified_diff("prog.py", before, after))
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "prog.py").read_text() == after
