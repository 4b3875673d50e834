"""Run tlparse (PyTorch's own TORCH_TRACE parser, `pip install tlparse`) and read back what it
found: the compile ids (``compile_directory.json``) and each compile's frame (the first line of
the stack on its ``compilation_metrics`` page: ``file:line in name``)."""

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

_FRAME = re.compile(
    r"Compilation Info for \[(?P<id>[^\]]+)\]\s*</h1>\s*<p><details><summary>Stack</summary>"
    r"<div class='stack-trie'><ul><li>(?P<file>[^<]+?):(?P<line>\d+) in (?P<name>[^<]+?)<br>"
)


def tlparse_binary() -> str:
    found = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    assert Path(found).exists(), "tlparse is not installed: pip install -e '.[test]'"
    return found


def run_tlparse(log_or_dir: Path, out: Path, *, all_ranks: bool = False) -> None:
    args = [tlparse_binary(), str(log_or_dir), "-o", str(out), "--overwrite", "--no-browser", "--plain-text"]
    if all_ranks:
        args.append("--all-ranks-html")
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def tlparse_compiles(out: Path) -> dict[str, tuple | None]:
    """compile id (attempt suffix dropped: ``3/0_1`` is attempt 1 of compile ``3/0``) -> the
    compiled frame (file, first line, name), or None where tlparse shows none (a limit hit)."""
    ids = json.loads((out / "compile_directory.json").read_text())
    compiles: dict[str, tuple | None] = {}
    for key in ids:
        compile_id = key.strip("[]").split("_")[0]
        if compile_id != "-/-":
            compiles.setdefault(compile_id, None)
    for page in out.glob("*/compilation_metrics_*.html"):
        match = _FRAME.search(page.read_text())
        if match:
            frame = (html.unescape(match.group("file")), int(match.group("line")), html.unescape(match.group("name")))
            compiles[match.group("id").split("_")[0]] = frame
    return compiles
