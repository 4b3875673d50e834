"""The proof every written file passes (recompile_fix/edits/proof.py), and the programs on which
the tool used to write wrong code (tests/programs/proof/CASE: the program, the Profile the tool
recorded on it, and what `apply` must write now):

* walrus: `f(x := torch.ones(n), c)` became `x_1 = x := torch.ones(n)` (a SyntaxError);
* nodebugranges: a Profile recorded with PYTHONNODEBUGRANGES=1 (no column spans) bound the wrong
  call's argument (`x_1 = "sum"` for `print("sum", f(x, 0.5).sum().item())`);
* one_line: `x = torch.ones(n); RESULTS.append(f(x, c))`: the mark went above the line
  (UnboundLocalError); now no edit, and one line saying why;
* nested_capture / builtin_shadow: a new `x` captured the global a lambda reads, a module-level
  `input` shadowed the builtin a function reads;
* crlf / cr: inserted lines ended in LF.
"""

import shutil
from pathlib import Path

import pytest

from conftest import PROGRAMS, run_cli
from equivalence import assert_same_outputs, run_recorded, total_compiles
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit, apply_edits
from recompile_fix.edits.proof import FixEdits, line_ending_at, prove, with_line_endings
from recompile_fix.edits.rewrite import rewrite
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import Location

CASES = PROGRAMS / "proof"
# case -> the one error line apply prints (None: it fixes the file cleanly)
EXPECTED_ERRORS = {
    "walrus": None,
    "nodebugranges": None,
    "one_line": "program.py:14: RF001 not applied: the fix fails its proof: the statement the fix inserts "
    "reads `x`, which line 14 binds between the insertion point and the call",
    "nested_capture": None,
    "builtin_shadow": None,
    "crlf": None,
    "cr": None,
}


def _stage(case: str, tmp_path):
    work = tmp_path / case
    work.mkdir()
    shutil.copy(CASES / case / "program.in.py", work / "program.py")
    shutil.copy(CASES / case / "profile.json", work / "profile.json")
    return work


@pytest.mark.parametrize("case", sorted(EXPECTED_ERRORS))
def test_apply_writes_the_proven_edit(case, tmp_path):
    work = _stage(case, tmp_path)
    expected_error = EXPECTED_ERRORS[case]
    result = run_cli("apply", ".", "--profile", "profile.json", "--no-cache", cwd=work)
    errors = [line for line in result.stderr.splitlines() if line.startswith("recompile-fix: error:")]
    if expected_error is None:
        assert result.returncode == 0 and errors == [], result.stderr
    else:
        assert result.returncode == 2
        (error,) = errors
        assert error.startswith(f"recompile-fix: error: {expected_error}"), error
    written = (work / "program.py").read_bytes()
    assert written == (CASES / case / "program.out.py").read_bytes()
    compile(written, "program.py", "exec")
    again = run_cli("apply", ".", "--profile", "profile.json", "--no-cache", cwd=work)
    assert (work / "program.py").read_bytes() == written, "a second apply changed the file"
    assert "Fixed 0" in again.stderr or "already fixed" in again.stderr


@pytest.mark.parametrize("case, ending", [("crlf", b"\r\n"), ("cr", b"\r")])
def test_inserted_lines_keep_the_files_line_ending(case, ending):
    written = (CASES / case / "program.out.py").read_bytes()
    others = [e for e in (b"\r\n", b"\r", b"\n") if e != ending]
    assert b"mark_dynamic(x, 0)" + ending in written
    assert all(written.replace(b"\r\n", b"").count(e) == 0 for e in others if e != b"\r\n"), written
    if ending == b"\r":
        assert b"\n" not in written


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c, e in sorted(EXPECTED_ERRORS.items()) if e is None])
def test_fixed_program_computes_the_same_and_compiles_no_more(case, tmp_path):
    before = run_recorded(CASES / case / "program.in.py", tmp_path)
    after = run_recorded(CASES / case / "program.out.py", tmp_path)
    assert_same_outputs(before, after, exact=True)
    assert total_compiles(after) <= total_compiles(before)
    assert before["stdout"] == after["stdout"]  # what each printed, run side by side


# -- the proof on its own: edits written by hand, as a broken rule would make them ------------------
def _proof(text: str, edits: list[Edit], anchor: int | None = None) -> str | None:
    return prove(text, apply_edits(text, edits), edits, [FixEdits(tuple(edits), anchor)])


def _insert_before(text: str, needle: str, statement: str) -> Edit:
    at = text.index(needle)
    at = text.rfind("\n", 0, at) + 1
    indent = text[at : len(text) - len(text[at:].lstrip(" "))]
    return Edit("m.py", at, at, indent + statement + "\n")


def test_a_fix_that_does_not_compile_is_refused():
    text = "for n in range(3):\n    f(x := g(n), 1)\n"
    start = text.index("x := g(n)")
    edits = [
        _insert_before(text, "f(x", "x_1 = x := g(n)"),
        Edit("m.py", start, start + len("x := g(n)"), "x_1"),
    ]
    assert "would not compile" in _proof(text, edits)


def test_a_global_declared_after_the_new_binding_is_refused():
    text = "def main():\n    global x\n    x = 1\n    f(g())\n"
    at = text.index("    global")
    assert "would not compile" in _proof(text, [Edit("m.py", at, at, "    x = 2\n")])


def test_a_new_local_read_by_a_nested_lambda_is_refused():
    text = "x = 2.0\n\n\ndef main():\n    scale = lambda t: t * x\n    return scale(f(ones(3)))\n"
    start = text.index("ones(3)")
    edits = [_insert_before(text, "return", "x = ones(3)"), Edit("m.py", start, start + len("ones(3)"), "x")]
    why = _proof(text, edits)
    assert why.startswith("the fix binds `x`, which `lambda` reads as a global name")


@pytest.mark.parametrize("reader", ["lambda: x", "[x for _ in range(2)]", "(x for _ in range(2))"])
def test_nested_scopes_of_every_kind_are_checked(reader):
    text = f"x = 1\n\n\ndef main():\n    r = {reader}\n    return f(g())\n"
    edits = [_insert_before(text, "return", "x = g()")]
    assert "reads as a global name" in _proof(text, edits)


def test_a_module_level_name_shadowing_a_builtin_is_refused():
    text = "def ask():\n    return callable(input)\n\n\nf(ones(3))\n"
    start = text.index("ones(3)")
    edits = [_insert_before(text, "f(ones", "input = ones(3)"), Edit("m.py", start, start + 7, "input")]
    assert _proof(text, edits) == ("the fix binds `input` at module level, where `ask` reads the builtin `input`")


def test_a_module_level_name_shadowing_a_global_read_elsewhere_is_refused():
    text = "from lib import *\n\n\ndef use():\n    return helper()\n\n\nf(ones(3))\n"
    edits = [_insert_before(text, "f(ones", "helper = ones(3)")]
    assert "reads the global `helper`" in _proof(text, edits)


def test_a_name_bound_earlier_on_the_line_is_refused():
    text = "def main():\n    for n in range(3):\n        x = ones(n); out.append(f(x, c))\n"
    edits = [_insert_before(text, "x = ones", "mark_dynamic(x, 0)")]
    why = _proof(text, edits, anchor=text.index("f(x, c)"))
    assert "reads `x`, which line 3 binds between the insertion point and the call" in why


def test_a_walrus_in_an_earlier_argument_is_refused():
    text = "out = f(y := g(), h(y))\n"
    start = text.index("h(y)")
    edits = [Edit("m.py", 0, 0, "a = h(y)\n"), Edit("m.py", start, start + 4, "a")]
    assert "reads `y`" in _proof(text, edits, anchor=start)


def test_the_target_of_the_statement_holding_the_call_binds_after_it():
    # `x = f(x)`: the mark reads the `x` passed to f, bound before the line: fine.
    text = "def main(x):\n    for _ in range(3):\n        x = f(x)\n"
    edits = [_insert_before(text, "x = f(x)", "mark_dynamic(x, 0)")]
    assert _proof(text, edits, anchor=text.index("f(x)")) is None


def test_edits_that_change_text_outside_their_spans_are_refused():
    text = "a = 1\nb = f(x)\n"
    edit = Edit("m.py", 6, 6, "mark(x)\n")
    assert prove(text, "a = 2\n" + apply_edits(text, [edit])[6:], [edit]).startswith("the fixed text differs")
    assert "splits a CRLF" in prove("a = 1\r\nb = 2\r\n", "a = 1\rX\nb = 2\r\n", [Edit("m.py", 6, 6, "X")])


def test_a_replaced_span_must_be_a_whole_node():
    text = "y = f(alpha + 1)\n"
    start = text.index("lpha")
    edit = Edit("m.py", start, start + 4, "b")  # `alpha` -> `ab`: part of a name
    assert "is not a whole expression or statement" in _proof(text, [edit])
    whole = Edit("m.py", text.index("alpha"), text.index(")"), "t(alpha + 1)")
    assert _proof(text, [whole]) is None


@pytest.mark.parametrize("ending", ["\r\n", "\r", "\n"])
def test_inserted_lines_take_the_files_line_ending(ending):
    text = ending.join(["import torch", "", "for n in range(3):", "    f(x)", ""])
    at = text.index("    f(x)")
    raw = Edit("m.py", at, at, "    mark(x, 0)\n")
    if ending != "\n":
        assert "ends with '\\n'" in prove(text, apply_edits(text, [raw]), [raw])
    (fixed,) = with_line_endings(text, [raw])
    assert fixed.new_text == "    mark(x, 0)" + ending
    assert prove(text, apply_edits(text, [fixed]), [fixed]) is None
    assert line_ending_at(text, at) == ending


class _Broken(Rule):
    """A rule whose fix is wrong: the rewrite must leave it out and say why."""

    id = "RF999"
    name = "broken"
    message = "broken"

    def fix(self, finding, source, torch_name):
        at = source.text.index("f(")
        return [Edit(finding.file, at, at, "def (\n")]


def test_a_fix_failing_its_proof_is_left_out_and_the_others_kept():
    text = "import torch\n\nf(torch.ones(3))\n"
    source = SourceFile.parse(Path("m.py"), text)
    broken = Finding("RF999", "m.py", Location("m.py", 3, col=0), "broken", Safety.SAFE)
    result = rewrite("m.py", source, [broken], {"RF999": _Broken()})
    assert result.after == text and result.applied == []
    ((finding, why),) = result.skipped
    assert finding is broken and why.startswith("the fix fails its proof: the fixed file would not compile")


def test_two_fixes_inserting_one_line_at_one_place_insert_it_once():
    """Each frame's fix marking one tensor at one call: the mark once, whichever fix made it."""
    from recompile_fix.analysis.source import SourceFile
    from recompile_fix.edits.edit import Edit
    from recompile_fix.edits.rewrite import rewrite
    from recompile_fix.findings.finding import Finding, Safety
    from recompile_fix.findings.rule import Rule
    from recompile_fix.profile.model import Location

    text = "import torch\nx = torch.ones(3)\nf(x)\n"
    source = SourceFile.parse(Path("m.py"), text)
    at = text.index("f(x)")

    class Mark(Rule):
        id = "RFTEST"

        def fix(self, finding, source, torch_name):
            return [Edit(finding.file, at, at, line, self.id) for line in finding.params["lines"]]

    def finding(*lines):
        return Finding("RFTEST", "m.py", Location("m.py", 3), "m", Safety.SAFE, params={"lines": list(lines)})

    mark_x, mark_y = "torch._dynamo.mark_dynamic(x, 0)\n", "torch._dynamo.mark_dynamic(y, 0)\n"
    result = rewrite("m.py", source, [finding(mark_x), finding(mark_y, mark_x)], {"RFTEST": Mark()})
    assert result.after == f"import torch\nx = torch.ones(3)\n{mark_x}{mark_y}f(x)\n"


def test_two_fixes_binding_one_name_at_one_place_with_other_values_fail_the_proof():
    from recompile_fix.edits.edit import Edit
    from recompile_fix.edits.proof import FixEdits, prove

    before = "import torch\ny = g(a[:8]) + h(b[:8])\n"
    at = before.index("y =")
    first = FixEdits((Edit("m.py", at, at, "x = a[:8]\n"),))
    second = FixEdits((Edit("m.py", at, at, "x = b[:8]\n"),))
    after = before[:at] + "x = a[:8]\nx = b[:8]\n" + before[at:]
    why = prove(before, after, [*first.edits, *second.edits], [first, second])
    assert why is not None and "two fixes bind `x`" in why
    same = FixEdits((Edit("m.py", at, at, "x = a[:8]\n"),))
    after = before[:at] + "x = a[:8]\nx = a[:8]\n" + before[at:]
    assert prove(before, after, [*first.edits, *same.edits], [first, same]) is None


def test_two_fixes_making_one_insertion_make_it_once():
    """Two findings adding `, dynamic=True` to one compile call: the argument once (twice, the
    file did not compile and `apply` wrote neither)."""
    from recompile_fix.analysis.source import SourceFile
    from recompile_fix.edits.edit import Edit
    from recompile_fix.edits.rewrite import rewrite
    from recompile_fix.findings.finding import Finding, Safety
    from recompile_fix.findings.rule import Rule
    from recompile_fix.profile.model import Location

    text = "import torch\ncompiled = torch.compile(model)\n"
    source = SourceFile.parse(Path("m.py"), text)
    at = text.index("model)") + len("model")

    class Dynamic(Rule):
        id = "RFTEST"

        def fix(self, finding, source, torch_name):
            return [Edit(finding.file, at, at, ", dynamic=True", self.id)]

    findings = [Finding("RFTEST", "m.py", Location("m.py", 2), "m", Safety.SAFE) for _ in range(2)]
    result = rewrite("m.py", source, findings, {"RFTEST": Dynamic()})
    assert result.after == "import torch\ncompiled = torch.compile(model, dynamic=True)\n"
    assert len(result.applied) == 2 and not result.skipped
