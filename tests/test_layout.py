"""The package's shape: one data model flowing forward (Profile -> Finding -> Edit), each stage in
its own folder, no module importing a later stage, no import circle, and the recorder (which
runs inside the user's process) loading nothing but the standard library."""

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "recompile_fix"

# In flow order. A module may import its own stage and earlier ones, never a later one.
STAGES = [
    (
        "base",
        (
            "recompile_fix",
            "recompile_fix.errors",
            "recompile_fix.suppression",
            "recompile_fix.config",
            "recompile_fix.progress",
            "recompile_fix.notebook",
            "recompile_fix.tool_code",
            "recompile_fix.cache_folder",
        ),
    ),
    ("profile", ("recompile_fix.profile", "recompile_fix._bootstrap")),
    ("analysis", ("recompile_fix.analysis",)),
    ("findings", ("recompile_fix.findings",)),
    ("edits", ("recompile_fix.edits",)),
    ("rules", ("recompile_fix.rules",)),
    ("pipeline", ("recompile_fix.pipeline",)),
    (
        "surfaces",
        (
            "recompile_fix.cli",
            "recompile_fix.__main__",
            "recompile_fix.report",
            "recompile_fix.output",
            "recompile_fix.rule_docs",
            "recompile_fix.reason_docs",
            "recompile_fix.html_report",
            "recompile_fix.verify",
            "recompile_fix.lsp",
        ),
    ),
]


def stage_of(module: str) -> int:
    best = None
    for index, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if module == prefix or (prefix != "recompile_fix" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} belongs to no stage: add it to STAGES"
    return best[0]


def modules() -> dict[str, Path]:
    """Every module of the package, rules included (recompile_fix/rules links to rules/)."""
    found = {}
    # rglob does not follow the link, so the rules are walked from their real folder.
    for root, prefix in ((PACKAGE, ("recompile_fix",)), (ROOT / "rules", ("recompile_fix", "rules"))):
        for path in sorted(root.rglob("*.py")):
            parts = prefix + path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    assert "recompile_fix.rules" in found and len(found) > 100, sorted(found)
    return found


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def syntax(path: Path) -> ast.Module:
    """A module's tree, parsed once per session (five tests walk every module's)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(path: Path, known: set[str], name: str = "") -> set[str]:
    """The package modules a file imports, at the top or inside functions (a lazy import is still
    a dependency); imports under ``if TYPE_CHECKING:`` only name types and are left out. A relative
    import (a rule folder's ``from .rule import RULE``) is resolved against ``name``, the module
    the file is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = syntax(path)
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _type_checking_only(node)
        for child in node.body
        for n in ast.walk(child)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.level == 0 and node.module or node.level and package):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "recompile_fix":
                while name not in known and "." in name:
                    name = name.rsplit(".", 1)[0]
                found.add(name)
    return found


@functools.cache
def graph() -> dict[str, frozenset[str]]:
    mods = modules()
    known = set(mods)
    return {name: frozenset(imports(path, known, name) - {name}) for name, path in mods.items()}


def test_every_module_has_a_stage():
    for name in modules():
        stage_of(name)


def test_no_module_imports_a_later_stage():
    backward = [
        f"{name} ({STAGES[stage_of(name)][0]}) imports {dep} ({STAGES[stage_of(dep)][0]})"
        for name, deps in graph().items()
        for dep in sorted(deps)
        if stage_of(dep) > stage_of(name)
    ]
    assert not backward, "\n".join(backward)


def test_no_import_circle():
    edges = graph()
    # A package's __init__ is imported on the way to each of its modules: it must not import them
    # back (none does), so the edges below are the whole story.
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    circles = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                circles.append(" -> ".join(path[path.index(dep) :] + [dep]))
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not circles, "\n".join(circles)


def rule_folder(name: str) -> bool:
    """A rule's folder (``recompile_fix.rules.rf001_mark_dynamic``): a package that exports its rule."""
    return re.fullmatch(r"recompile_fix\.rules\.rf\d{3}_\w+", name) is not None


def test_rule_folders_hold_their_rule():
    """Every rule folder has a ``rule`` module, and its ``__init__`` imports that alone."""
    edges = graph()
    folders = [name for name in modules() if rule_folder(name)]
    assert folders
    for name in folders:
        assert f"{name}.rule" in edges and edges[name] == {f"{name}.rule"}, f"{name} imports {sorted(edges[name])}"


def test_stage_packages_import_nothing_on_their_own():
    """Loading one module of a stage loads nothing else of it (the recorder's package included).
    Two packages are registries and gather their modules: the rules (ALL_RULES) and the command
    line (its group, ``recompile_fix.cli:main``, with every command added); a rule folder's
    ``__init__`` exports its rule (``test_rule_folders_hold_their_rule``)."""
    edges = graph()
    registries = ("recompile_fix", "recompile_fix.rules", "recompile_fix.cli")
    for name, path in modules().items():
        if path.name == "__init__.py" and name not in registries and not rule_folder(name):
            assert not edges[name], f"{name} imports {sorted(edges[name])}"


def test_recorder_loads_only_the_standard_library():
    """The bootstrap, the warm runner's server, the recorder (every module of its package) and the
    outputs recorder run inside the user's process, with the user's interpreter, whose environment
    has none of the tool's dependencies (libcst, click, black): loading them must load nothing
    outside the standard library (torch is the user's own and is imported by the program;
    tests/test_user_install.py runs it all in such a process)."""
    code = (
        "import sys; before = set(sys.modules)\n"
        "import runpy; runpy.run_path('recompile_fix/_bootstrap/sitecustomize.py')\n"
        "import importlib, pkgutil, recompile_fix.profile.recorder as recorder\n"
        "loaded = [importlib.import_module(f'{recorder.__name__}.{m.name}')\n"
        "          for m in pkgutil.iter_modules(recorder.__path__)]\n"
        "assert len(loaded) > 1, loaded  # every module of the recorder's package\n"
        "import recompile_fix.profile.compiled_outputs\n"
        "runpy.run_path('recompile_fix/_bootstrap/zygote.py')\n"
        "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] != 'recompile_fix'\n"
        "             and m.split('.')[0] not in sys.stdlib_module_names)\n"
        "print(new)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_importing_the_pipeline_and_the_rules_reads_no_libcst_name():
    """The command line defers libcst (recompile_fix/cli/deferred_imports.py) so that a warm run,
    which parses nothing, does not pay its import: no module of the pipeline or a rule may read a
    libcst name when it is imported (a module-level ``(cst.For, cst.While)``), or every run pays."""
    code = (
        "import importlib, pkgutil, sys\n"
        "from recompile_fix.cli.deferred_imports import defer_heavy, is_loaded\n"
        "defer_heavy()\n"
        "import recompile_fix, recompile_fix.rules\n"
        "for m in pkgutil.walk_packages(recompile_fix.__path__, 'recompile_fix.'):\n"
        "    if m.name.split('.')[1] not in ('lsp', '_bootstrap', '__main__') and 'recorder' not in m.name:\n"
        "        importlib.import_module(m.name)\n"
        "print(is_loaded('libcst'), len(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "False", done.stdout


# Budgets a reader can hold in their head. They only ever tighten: lower them when the code allows,
# never raise them to let a change in.
MODULE_LINES = 700
FUNCTION_LINES = 100


def test_no_module_over_the_line_budget():
    long = [
        f"{path.relative_to(ROOT)}: {lines} lines"
        for path in modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    ]
    assert not long, f"over {MODULE_LINES} lines (split by concern):\n" + "\n".join(long)


def test_no_function_over_the_line_budget():
    long = []
    for path in modules().values():
        for node in ast.walk(syntax(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, f"over {FUNCTION_LINES} lines (split into named steps):\n" + "\n".join(long)


def test_mypy_masks_nothing():
    """mypy checks every module: no override may switch its errors off (`ignore_errors`), and no
    module is left out of its `files`."""
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    masked = [o["module"] for o in mypy.get("overrides", []) if o.get("ignore_errors")]
    assert not masked, f"ignore_errors masks {masked}"
    assert not mypy.get("ignore_errors"), "ignore_errors is on for every module"
    assert mypy["files"] == ["recompile_fix"], mypy["files"]
