"""Issue 32, failures 4 and 5: a safe fix never changes what a program computes, never compiles
more, never crashes. The audit's hazard programs, each with the Profile a run records on it
(tests/fuzz_programs.py's `profile_for`), get their safe fixes as `apply` makes them:

* a call in a branch of a conditional expression, after `and`, in an `assert` or in a class body:
  nothing is bound or marked before its statement (it would run where the call does not: a value
  made on a path that never made it, every later random tensor different; `python -O` skips the
  assert; a name bound in a class body is a class attribute); RF002's in-place wrap keeps the
  evaluation order;
* the same call in an `elif` test and its body, two calls on one line: the calls of a function
  are fixed together or none is (one passing a tensor, one a number compiles more);
* a parameter named `torch`: the inserted code names the module through an alias.

Fast checks run the rewrite on tests/fake_torch.py (same results, as many tensors made, no mark
off the path to the call); the slow one runs a few with torch and compares tensors and torch's
own compile counts.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_python
from fake_torch import run_program
from fuzz_programs import Program, profile_for
from recompile_fix.profile.model import Profile
from recompile_fix.rules import ALL_RULES
from test_fuzz_programs import apply_to

HEAD = """import torch
{seed}
RESULTS = []


@torch.compile
def f(x, c):
    return x * c


"""

# name: (the code after HEAD, how the tensor reaches the call: "call" or "name")
HAZARDS = {
    "ternary": (
        "for n in (3, 4, 5):\n"
        "    y = f(torch.{make}(n), n - 2.5) if n > 4 else None\n"
        "    RESULTS.append(torch.{make}(2))\n",
        "call",
    ),
    "and": (
        "for n in (3, 4, 5):\n    y = n > 4 and f(torch.{make}(n), n - 2.5)\n    RESULTS.append(torch.{make}(2))\n",
        "call",
    ),
    "or": (
        "for n in (3, 4, 5):\n    y = n < 5 or f(torch.{make}(n), n - 2.5)\n    RESULTS.append(torch.{make}(2))\n",
        "call",
    ),
    "assert": (
        "for n in (3, 4, 5):\n"
        "    assert f(torch.{make}(n), n - 2.5) is not None\n"
        "    RESULTS.append(torch.{make}(2))\n",
        "call",
    ),
    "class_body": (
        "for n in (3, 4, 5):\n"
        "    class K:\n"
        "        y = f(torch.{make}(n), n - 2.5)\n"
        "    RESULTS.append(sorted(k for k in vars(K) if not k.startswith('__')))\n"
        "    RESULTS.append(K.y)\n",
        "call",
    ),
    "elif_and_body": (
        "for n in (3, 4, 5):\n"
        "    x = torch.{make}(n)\n"
        "    c = n - 2.5\n"
        "    if n < 0:\n"
        "        pass\n"
        "    elif f(x, c) is not None:\n"
        "        RESULTS.append(f(x, c))\n",
        "name",
    ),
    "two_on_line": (
        "for n in (3, 4, 5):\n"
        "    c = n - 2.5\n"
        "    a = f(torch.{make}(n), c); b = f(torch.{make}(n), c)\n"
        "    RESULTS.append(a)\n"
        "    RESULTS.append(b)\n",
        "call",
    ),
    "torch_parameter": (
        "def step(x, c, torch=None):\n"
        "    return f(x, c)\n"
        "\n"
        "\n"
        "for n in (3, 4, 5):\n"
        "    RESULTS.append(step(torch.{make}(n), n - 2.5))\n",
        "name",
    ),
}

# Where a call runs only on some evaluations of its statement: no statement may go before it.
CONDITIONAL = ("ternary", "and", "or", "assert", "class_body")


def _text(name: str, real: bool = False) -> str:
    body, _ = HAZARDS[name]
    seed = "torch.manual_seed(0)" if real else ""
    make = "randn" if real else "ones"
    text = HEAD.format(seed=seed) + body.format(make=make)
    if real:
        text += "print([t.tolist() if isinstance(t, torch.Tensor) else t for t in RESULTS])\n"
    return text


def _program(name: str, text: str) -> Program:
    argument = HAZARDS[name][1]
    return Program(text, name, argument, "varying", "module", "x", "\n", False, ())


def _fixed(name: str, tmp_path: Path, text: str | None = None, unsafe: bool = False) -> tuple[str, list[str]]:
    """The program after `apply` (safe fixes only, unless ``unsafe``), and apply's errors."""
    program = _program(name, text or _text(name))
    if unsafe:
        from recompile_fix.pipeline.fix import run_apply

        (tmp_path / "program.py").write_bytes(program.data)
        (tmp_path / "profile.json").write_text(json.dumps(profile_for(program)))
        profile = Profile.load(tmp_path / "profile.json")
        result = run_apply(
            [str(tmp_path)], profile, ALL_RULES, root=str(tmp_path), unsafe_fixes=True, jobs=1, use_cache=False
        )
    else:
        _, result = apply_to(program, tmp_path, profile_for(program))
    for error in result.errors:
        assert "internal error" not in error and "Traceback" not in error, error
    return (tmp_path / "program.py").read_text(), result.errors


def _calls_of_f(text: str) -> list[ast.Call]:
    tree = ast.parse(text)
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "f"]


@pytest.mark.parametrize("name", sorted(HAZARDS))
def test_the_safe_fixes_compute_what_the_program_computed(name, tmp_path):
    """On fake torch: same results, as many tensors made (a hoisted argument makes one where the
    call does not run), every mark on a tensor the compiled function gets next; under `-O` too."""
    text = _text(name)
    fixed, _ = _fixed(name, tmp_path)
    before, after = run_program(text), run_program(fixed)
    assert after["error"] is None, (after["error"], fixed)
    if name != "torch_parameter":  # the unfixed program reads `torch.ones` on the module
        assert after["results"] == before["results"], fixed
    assert after["made"] == before["made"], fixed
    assert after["misplaced_marks"] == 0, fixed
    optimized_before, optimized_after = run_program(text, optimize=1), run_program(fixed, optimize=1)
    keys = ("results", "stdout", "made", "error") if name != "torch_parameter" else ("made",)
    assert [optimized_after[k] for k in keys] == [optimized_before[k] for k in keys], fixed
    if name == "assert":  # nothing of the assert's call runs under -O, marks included
        assert optimized_after["marks"] == optimized_before["marks"] == 0, fixed


@pytest.mark.parametrize("name", CONDITIONAL)
def test_nothing_is_hoisted_out_of_a_call_that_may_not_run(name, tmp_path):
    """The rewrite changes only the call's own arguments, in place: no line goes before its
    statement. RF002's wrap, which keeps the order, is still made (with --unsafe-fixes: `x`'s size
    changes with the number at every compile and gets no mark, so alone the wrap merges no
    compile, and the safe fixes leave it to a run)."""
    text = _text(name)
    fixed, _ = _fixed(name, tmp_path)
    assert fixed == text  # the safe fixes: no mark, and the wrap alone changes nothing
    fixed, _ = _fixed(name, tmp_path, unsafe=True)
    assert len(fixed.splitlines()) == len(text.splitlines()), fixed
    assert "mark_dynamic" not in fixed
    (call,) = _calls_of_f(fixed)
    assert "torch.tensor(n - 2.5" in ast.unparse(call.args[1]), fixed  # RF002, in place


@pytest.mark.parametrize("name", ["elif_and_body", "two_on_line"])
def test_the_calls_of_a_function_are_wrapped_together_or_not_at_all(name, tmp_path):
    """The elif's call compiled; the body's (or the line's second) was a cache hit passing a
    name, whose wrap is unsafe: the safe fixes wrap neither, never one."""
    fixed, _ = _fixed(name, tmp_path)
    wrapped = [c for c in _calls_of_f(fixed) if "torch.tensor" in ast.unparse(c.args[1])]
    assert wrapped == [], fixed


def test_the_calls_of_a_function_are_wrapped_together_with_unsafe_fixes(tmp_path):
    from recompile_fix.pipeline.fix import run_apply
    from recompile_fix.profile.model import Profile
    from recompile_fix.rules import ALL_RULES

    program = _program("elif_and_body", _text("elif_and_body"))
    (tmp_path / "program.py").write_bytes(program.data)
    (tmp_path / "profile.json").write_text(json.dumps(profile_for(program)))
    profile = Profile.load(tmp_path / "profile.json")
    run_apply([str(tmp_path)], profile, ALL_RULES, root=str(tmp_path), jobs=1, use_cache=False, unsafe_fixes=True)
    fixed = (tmp_path / "program.py").read_text()
    wrapped = [c for c in _calls_of_f(fixed) if "torch.tensor" in ast.unparse(c.args[1])]
    assert len(wrapped) == 2, fixed


def test_a_parameter_named_torch_gets_an_alias(tmp_path):
    """`def step(x, c, torch=None)`: the mark and the wrap name the module as `_torch`, imported
    at module level; the code outside `step` keeps `torch`."""
    from recompile_fix.pipeline.fix import run_apply
    from recompile_fix.rules import ALL_RULES

    program = _program("torch_parameter", _text("torch_parameter"))
    profile, _ = apply_to(program, tmp_path, profile_for(program))
    fixed = (tmp_path / "program.py").read_text()
    assert "import torch as _torch\n" in fixed
    step = fixed[fixed.index("def step") : fixed.index("for n in")]
    assert "_torch._dynamo.mark_dynamic(x, 0)" in step and "_torch.tensor(c, dtype=_torch.float64)" in step
    assert "torch.ones(n)" in fixed[fixed.index("for n in") :]
    assert run_program(fixed)["error"] is None
    # Applied again: nothing more to do (the alias is recognised).
    again = run_apply([str(tmp_path)], profile, ALL_RULES, root=str(tmp_path), jobs=1, use_cache=False)
    assert again.rewrites == [] and (tmp_path / "program.py").read_text() == fixed


def test_a_shadowed_torch_is_seen_in_every_scope():
    from recompile_fix.analysis.source import SourceFile

    text = (
        "import torch\n"  # 1
        "def a(torch):\n"  # 2
        "    return torch\n"  # 3
        "def b():\n"  # 4
        "    torch = 1\n"  # 5
        "    def inner():\n"  # 6
        "        return 0\n"  # 7
        "    return inner\n"  # 8
        "def c():\n"  # 9
        "    global torch\n"  # 10
        "    torch = None\n"  # 11
        "class K:\n"  # 12
        "    torch = 2\n"  # 13
        "    def m(self):\n"  # 14
        "        return 0\n"  # 15
        "x = 1\n"  # 16
    )
    source = SourceFile.parse(Path("m.py"), text)
    shadowed = {line for line in range(1, 17) if source.shadowed_at(line, "torch")}
    # A class body's name is not seen from its methods (15), nor a global declaration (10-11).
    assert shadowed == {2, 3, 4, 5, 6, 7, 8, 12, 13}
    assert source.torch_name_at(3) is None and source.torch_name_at(16) == "torch"


# -- with torch ----------------------------------------------------------------------------------
def _torch_run(work: Path, text: str, optimize: bool = False) -> tuple[str, dict]:
    (work / "run.py").write_text(text)
    done = run_python(PROGRAMS / "torch_metrics.py", *(["-O"] if optimize else []), "run.py", cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    metrics = json.loads(next(line for line in lines if line.startswith("TORCH_METRICS "))[len("TORCH_METRICS ") :])
    printed = "\n".join(line for line in lines if not line.startswith("TORCH_"))
    return printed, metrics


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ternary", "assert", "two_on_line", "torch_parameter"])
def test_with_torch_the_same_tensors_and_no_more_compiles(name, tmp_path):
    """Seeded random tensors drawn after the call are the same after the fixes (nothing drawn on
    a path that drew nothing), and torch compiles no more; the assert also as `python -O` runs it
    (tests/programs/torch_metrics.py -O: the script compiled without its asserts)."""
    text = _text(name, real=True)
    fixed, _ = _fixed(name, tmp_path, text, unsafe=True)  # the wrap alone is unproven where no mark goes
    assert fixed != text  # RF002's wrap, at least
    for optimize in (False, True) if name == "assert" else (False,):
        before, compiles_before = _torch_run(tmp_path, text, optimize)
        after, compiles_after = _torch_run(tmp_path, fixed, optimize)
        assert after == before, (optimize, fixed)
        assert sum(compiles_after.values()) <= sum(compiles_before.values()), (compiles_before, compiles_after)


def test_a_rewrite_that_leaves_one_call_out_leaves_out_all():
    """Findings fixed together (``params["together"]``): one whose fix fails leaves the file
    without the others too, each saying why."""
    from recompile_fix.analysis.source import SourceFile
    from recompile_fix.edits.edit import Edit
    from recompile_fix.edits.rewrite import rewrite
    from recompile_fix.findings.finding import Finding, Safety
    from recompile_fix.findings.rule import Rule
    from recompile_fix.profile.model import Location

    text = "import torch\nf(x, 0.5)\nf(x, 1.5)\ng(x, 2.5)\n"
    source = SourceFile.parse(Path("m.py"), text)

    class Wrap(Rule):
        id = "RFTEST"

        def fix(self, finding, source, torch_name):
            if finding.params["fails"]:
                raise RuntimeError("cannot")
            start = source.text.index(finding.params["value"])
            end = start + len(finding.params["value"])
            return [Edit(finding.file, start, end, f"{torch_name}.tensor({finding.params['value']})", self.id)]

    def finding(line: int, value: str, fails: bool, together: str | None) -> Finding:
        params = {"value": value, "fails": fails, **({"together": together} if together else {})}
        return Finding("RFTEST", "m.py", Location("m.py", line), "m", Safety.SAFE, params=params)

    findings = [finding(2, "0.5", False, "f"), finding(3, "1.5", True, "f"), finding(4, "2.5", False, None)]
    result = rewrite("m.py", source, findings, {"RFTEST": Wrap()})
    assert result.after == "import torch\nf(x, 0.5)\nf(x, 1.5)\ng(x, torch.tensor(2.5))\n"
    skipped = {f.location.line: why for f, why in result.skipped}
    assert "internal error" in skipped[3] and "fixed together" in skipped[2]
    assert [f.location.line for f in result.applied] == [4]


TWO_IN_ONE_STATEMENT = """import torch
from torch import nn

torch.manual_seed(0)
critic = torch.compile(nn.Linear(4, 1), backend="eager")
data = torch.randn(29, 4)
fakes = torch.randn(16, 4)
losses = []
for i in range(0, 29, 8):
    loss = critic(fakes[:8]).mean() - critic(data[i : i + 8]).mean()
    losses.append(loss.detach())
"""


@pytest.mark.slow
def test_two_calls_of_one_statement_bind_two_names(tmp_path):
    """A trial's GAN loss: with --unsafe-fixes both calls' arguments were bound to `x`, the first
    overwritten: the critic saw the real batch twice. Each call's name is its own, and the
    program computes what it did."""
    from conftest import run_cli
    from equivalence import assert_same_outputs, profile_recorded, run_recorded

    (tmp_path / "program.py").write_text(TWO_IN_ONE_STATEMENT)
    _, before = profile_recorded(tmp_path, "program.py")
    run_cli("apply", ".", "--unsafe-fixes", cwd=tmp_path, check=0)
    fixed = (tmp_path / "program.py").read_text()
    bound = [line.split(" = ")[0].strip() for line in fixed.splitlines() if line.strip().endswith("i + 8]")]
    assert len(bound) == 1 and "data[i : i + 8]" not in fixed.split("loss = ")[1], fixed
    names = [
        line.split(" = ")[0].strip() for line in fixed.splitlines() if " = " in line and "[" in line.split(" = ")[1]
    ]
    assert len(set(names)) == len(names), fixed
    after = run_recorded(tmp_path / "program.py", tmp_path)
    assert_same_outputs(before, after, exact=True)
