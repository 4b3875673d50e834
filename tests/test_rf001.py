"""RF001 mark-dynamic beyond the golden cases: the notes that say torch will still recompile, and
the calls it must leave alone (with the reason)."""

import shutil

import pytest

from conftest import PROGRAMS, run_cli, run_python
from recompile_fix.analysis.project import Project
from recompile_fix.findings.finding import Safety
from recompile_fix.findings.plan import plan
from recompile_fix.profile.model import Profile
from recompile_fix.rules import rule_by_id

HERE = PROGRAMS / "rf001"


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    def profile(script):
        out = tmp_path_factory.mktemp("p") / "profile.json"
        run_cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(HERE / script), check=0)
        loaded = Profile.load(out)
        from conftest import ROOT

        return plan(loaded, Project(ROOT, expected_hashes=loaded.sources), (rule_by_id("RF001"),))

    return profile


def test_cropped_view_and_size_one_start_say_torch_still_recompiles(findings):
    (finding,) = findings("cropped_generate.py")
    (mark,) = finding.params["marks"]
    assert finding.safety is Safety.SAFE and mark["dims"] == [1]
    assert finding.location.line == 19  # logits = self(idx_cond), inside generate
    # The first call had size 1, specialised even when marked; mark_unbacked would avoid that, but
    # the model calls into torch (which may need a concrete size: SDPA graph-breaks), so it is
    # only suggested.
    assert finding.params["mark"] == "mark_dynamic"
    notes = " ".join(finding.notes)
    assert "0/1 specialisation" in notes and "mark_unbacked" in notes
    assert "stride guard on `idx`" in notes and "contiguous_format" in notes
    assert mark["contiguous"] is True  # the copy goes in too (golden RF001/cropped_generate)


def test_a_contiguous_copy_of_a_name_read_again_is_unsafe(findings):
    (finding,) = findings("cropped_reused.py")
    assert finding.params["marks"][0]["contiguous"] is True and finding.safety is Safety.UNSAFE
    assert any("uses again" in note for note in finding.notes)


@pytest.mark.slow
def test_size_one_with_a_torch_older_than_mark_unbacked_keeps_mark_dynamic_and_says_so(tmp_path):
    out = tmp_path / "profile.json"
    run_cli("profile", "-o", str(out), "--backend", "eager", "--", "python", str(HERE / "cropped_generate.py"), check=0)
    loaded = Profile.load(out)
    loaded.torch_version = "2.3.1"
    from conftest import ROOT

    (finding,) = plan(loaded, Project(ROOT, expected_hashes=loaded.sources), (rule_by_id("RF001"),))
    assert finding.params["mark"] == "mark_dynamic"
    assert "0/1 specialisation" in " ".join(finding.notes)


def test_compiled_sequential_maps_args0_to_the_call(findings):
    by_line = {f.location.line: f for f in findings("sequential_and_comprehension.py")}
    seq = by_line[6]
    assert seq.safety is Safety.SAFE and seq.params["marks"][0]["base"] == {"index": 0}
    assert seq.params["mark"] == "maybe_mark_dynamic"
    comprehension = by_line[14]
    assert comprehension.safety is Safety.NONE
    assert "inside a lambda or comprehension" in comprehension.notes[0]


def test_library_code_between_the_call_and_the_compiled_frame(findings):
    """steplib (in a site-packages folder) calls the compiled function: with the user's own
    tensor (marked before the user's call into the library), or with a copy it makes (then only
    the compile call can help: `dynamic=True`, unsafe)."""
    by_line = {f.location.line: f for f in findings("through_library/program.py")}
    passed = by_line[24]  # outputs.append(steplib.run(scale, x))
    assert passed.safety is Safety.SAFE and passed.params["mark"] == "maybe_mark_dynamic"
    assert passed.params["marks"] == [
        {
            "base": {"expr": "x"},
            "steps": [],
            "dims": [0],
            "label": "x",
            "source": "x",
            "optional": False,
            "contiguous": False,
        }
    ]
    copied = by_line[19]  # shift_compiled = torch.compile(shift)
    assert copied.safety is Safety.UNSAFE and copied.params["dynamic"] == "add"
    assert "`run_copy` at " in copied.message and "does not hold it" in " ".join(copied.notes)


@pytest.mark.parametrize(
    "body, values",
    [
        ("if x.shape[0] == 4:\n        return x\n    return -x", {4}),
        ("n = x.size(0)\n    if n in (4, 8):\n        return x\n    return -x", {4, 8}),
        (
            "match x.shape[0]:\n        case 4 | 6:\n            return x\n        case _:\n            return -x",
            {4, 6},
        ),
        ("if x.shape[0] == y.shape[0]:\n        return x\n    return -x", None),  # not a literal
        ("if x.shape[0] == 4 or x.shape[0] > 9:\n        return x\n    return -x", {4}),
    ],
)
def test_the_literals_a_size_is_compared_with(body, values):
    """RF001 keeps a mark safe on a size the code tests for equality only where the recorded sizes
    and these literals show it merges compiles (golden RF001/specialized_dim: 2, 3, 4, 5 with
    `== 4`); else `fix` proves it (tests/programs/verify/planted.py: `case 4:` at the first size)."""
    import libcst as cst

    from recompile_fix.analysis.source import SourceFile
    from recompile_fix.rules.rf001_mark_dynamic.size_uses import SizeUses

    source = SourceFile.parse("m.py", f"def f(x, y):\n    {body}\n")
    func = next(iter(source.nodes(cst.FunctionDef)))
    uses = SizeUses(func, "x", source)
    assert 0 in uses.compared_dims() and uses.compared_values(0) == values


# -- a call that compiled dynamic only because other calls changed the size ----------------------
def _borrow(dims: dict, inputs: dict | None = None, marked: set | None = None):
    from recompile_fix.profile.model import Compile, Location
    from recompile_fix.rules.rf001_mark_dynamic.size_evidence import SiteEvidence, borrow_marks

    site = Location(file="program.py", line=30)
    ev = SiteEvidence(None, site, [Compile(id="0/2", dims=dims, inputs=inputs or {})])  # type: ignore[arg-type]
    return borrow_marks([ev], {("ids", 1)} if marked is None else marked)


def test_an_eval_call_that_compiled_dynamic_gets_the_mark_the_training_call_gets():
    [ev] = _borrow({"ids": [{"dim": 1, "state": "dynamic"}]})
    assert ev.borrowed and ev.changed == {"ids": {1}}


@pytest.mark.parametrize(
    "dims, inputs, marked",
    [
        ({"ids": [{"dim": 1, "state": "dynamic"}]}, {"ids": {"type": "Tensor", "marked": [1]}}, None),  # its own mark
        ({"ids": [{"dim": 1, "state": "specialized", "size": 10}]}, None, None),  # static here anyway
        ({"ids": [{"dim": 0, "state": "dynamic"}]}, None, None),  # another dim than the fix marks
        ({"ids": [{"dim": 1, "state": "dynamic"}]}, None, set()),  # the fix marks nothing elsewhere
    ],
)
def test_no_borrowed_mark_where_nothing_is_taken_away(dims, inputs, marked):
    assert _borrow(dims, inputs, marked) == []


@pytest.mark.slow
def test_an_int_argument_that_carries_the_size_gets_no_mark(tmp_path):
    """`split_heads(x, (2, T, 4, 8))` with `x.view(shape)`: the recorded int `shape[1]` equals
    `x` dim 1 at every compile. A mark cannot remove the recompile (the int is specialised) and
    `mark_dynamic` raised ConstraintViolationError: [no fix], with the int named; nothing written."""
    program = tmp_path / "program.py"
    shutil.copy(PROGRAMS / "shapes" / "int_carries_size.py", program)
    before = program.read_text()
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    report = run_cli("report", "--output-format", "full", cwd=tmp_path, check=0).stdout
    assert "RF001 [no fix]" in report and "`shape[1]`, an int argument, carries `x` dim 1's size (8 -> 16)" in report
    assert "pass the size from the tensor instead (`x.shape[1]`" in report  # the dim that changed
    run_cli("apply", ".", "--unsafe-fixes", cwd=tmp_path, check=0)
    assert program.read_text() == before


SHARED_WITH_OTHER_COMPILED_CODE = """import torch

torch.manual_seed(0)
emb = torch.nn.Embedding(32, 8)


@torch.compile(backend="eager")
def embed(ids):
    return emb(ids).mean(1)


@torch.compile(backend="eager")
def weighted_sum(ids):
    s = ids[:, 0] * 0
    for i in range(ids.size(1)):
        s = s + ids[:, i] * (i + 1)
    return s


outputs = []
for n in (5, 6, 7):
    ids = torch.randint(0, 32, (2, n))
    outputs.append(embed(ids))
    outputs.append(weighted_sum(ids))
"""


@pytest.mark.slow
def test_a_tensor_also_passed_to_other_compiled_code_gets_a_mark_that_cannot_raise(tmp_path):
    """A trial: `mark_dynamic(ids, 1)` for `embed` went with `ids` into `weighted_sum`, whose
    `range(ids.size(1))` specialises the size: ConstraintViolationError. The mark is
    `maybe_mark_dynamic` there, and the program runs as it did, compiling less."""
    from equivalence import assert_same_outputs, profile_recorded, run_recorded, total_compiles

    program = tmp_path / "program.py"
    program.write_text(SHARED_WITH_OTHER_COMPILED_CODE)
    _, before = profile_recorded(tmp_path, "program.py")
    run_cli("apply", ".", cwd=tmp_path, check=0)
    fixed = program.read_text()
    assert "torch._dynamo.maybe_mark_dynamic(ids, 1)" in fixed and "torch._dynamo.mark_dynamic(" not in fixed, fixed
    after = run_recorded(program, tmp_path)
    assert_same_outputs(before, after, exact=True)
    assert total_compiles(after) < total_compiles(before)


def test_a_01_guard_on_a_derived_size_is_not_told_as_the_inputs_size():
    """`2 <= x.size()[2] <= 32` guards x's range because a feature map after a stride of 32 was 1
    where x was 32: x itself was never 0 or 1 (a multi-scale detector, 32/48/64)."""
    from recompile_fix.profile.model import Frame, Reason
    from recompile_fix.rules.rf001_mark_dynamic.size_evidence import SiteEvidence

    derived = Reason(kind="size_specialization", text="2 <= x.size()[2] <= 32", source="x", dim=2)
    evidence = SiteEvidence(Frame("m.py", 1, "forward"), None, [], sizes={("x", 2): [48, 32]}, reasons=[derived])
    assert evidence.small("x", [2]) and not evidence.passed_small("x", [2])
    evidence.sizes[("x", 2)] = [48, 1]
    assert evidence.passed_small("x", [2])


@pytest.mark.parametrize(
    "backend, forced, safety",
    [
        ("inductor", None, Safety.UNSAFE),  # the program's own backend generates kernels: a run decides
        ("eager", None, Safety.SAFE),
        ("aot_eager", None, Safety.SAFE),
        (None, None, Safety.SAFE),  # an older Profile: no backend recorded
        ("eager", "eager", Safety.SAFE),  # `profile --backend eager` chose it: the claim is about that run
    ],
)
def test_a_mark_under_a_kernel_generating_backend_is_unproven(tmp_path, backend, forced, safety):
    """inductor compiles another kernel for a dynamic size: a ragged last batch of a BatchNorm CNN
    marked gave losses 2.4e-7 apart, and on CPU its reduction guard (`17 <= size <= 4096`) kept
    the batch of 4 recompiling (2 -> 2). Safe only where the backend runs the graph's ops as they are."""
    from golden_cases import GOLDEN, stage_case

    work = stage_case(GOLDEN / "RF001" / "ragged_batch_module", tmp_path / "work")
    profile = Profile.load(work / "profile.json")
    profile.backend = forced
    for frame in profile.frames:
        for compile_ in frame.compiles:
            compile_.backend = backend
    (finding,) = [f for f in plan(profile, Project(work, expected_hashes=profile.sources), (rule_by_id("RF001"),))]
    assert finding.safety is safety
    if safety is Safety.UNSAFE:
        assert finding.unproven and finding.tolerance and "inductor" in finding.tolerance["why"]
        assert any("reductions may round differently" in n for n in finding.notes)


def test_generate_with_a_static_cache_sized_per_call_says_how_to_size_it_once(tmp_path):
    """generate() with a static cache, max_new_tokens 4, 8, 16 (recorded): the compiled forward
    recompiles for the cache's length. Beside `dynamic=True`, the finding says to size the cache
    once (`max_cache_len=32` there: 4 compiles -> 2, the same tokens, measured)."""
    work = tmp_path / "static_cache"
    shutil.copytree(PROGRAMS / "static_cache", work)
    out = run_cli("report", "profile.json", cwd=work, check=0).stdout
    assert "compile it with `dynamic=True`" in out
    assert (
        'a cache sized by each call (lengths 9, 13 seen): `generate(..., cache_implementation="static", '
        "max_cache_len=N)`" in out
    )


def test_a_mark_made_above_in_the_same_block_is_not_made_again():
    """A new user's two models fed one batch: each call's fix marked `batch`, and `apply` wrote
    the same `maybe_mark_dynamic(batch, 0)` twice, three lines apart. A mark holds for the tensor:
    the second goes, unless the code between rebinds the name or leaves the block."""
    from recompile_fix.edits.edit import Edit
    from recompile_fix.edits.rewrite import _without_marks_made_above

    text = (
        "for i in range(3):\n"
        "    batch = data[i]\n"
        "    a = bert(batch)\n"
        "    b = qwen(batch)\n"
        "    batch = batch * 2\n"
        "    c = gpt(batch)\n"
    )
    mark = "    torch._dynamo.maybe_mark_dynamic(batch, 0)\n"
    at = [text.index(line) for line in ("    a = bert", "    b = qwen", "    c = gpt")]
    first = Edit("p.py", at[0], at[0], mark)
    second, third = (Edit("p.py", a, a, mark) for a in at[1:])
    assert _without_marks_made_above([second], [first], text) == []
    assert _without_marks_made_above([third], [first], text) == [third]  # rebound between
    other = Edit("p.py", at[1], at[1], "    torch._dynamo.maybe_mark_dynamic(mask, 0)\n")
    assert _without_marks_made_above([other], [first], text) == [other]
    outside = "if x:\n    batch = d\n    torch.f(batch)\nelse:\n    torch.g(batch)\n"
    inner, other_branch = outside.index("    torch.f"), outside.index("    torch.g")
    kept = [Edit("p.py", inner, inner, mark)]
    assert _without_marks_made_above([Edit("p.py", other_branch, other_branch, mark)], kept, outside) != []


def test_a_mark_under_a_kernel_generating_backend_where_the_program_asks_for_static_kernels_is_a_trade_off(tmp_path):
    """A trial's bucketed server: `torch.compile(model, dynamic=False)  # static kernels per
    bucket`, under inductor. Plain `fix` kept the mark as "verified" (5 -> 1 compiles: one
    dynamic kernel where the program chose one per size). Under inductor a mark there gives the
    static kernels away: a trade-off, tried only with --unsafe-fixes; under eager it stays safe."""
    from golden_cases import GOLDEN, stage_case
    from recompile_fix.findings.finding import TRADE_OFF

    work = stage_case(GOLDEN / "RF001" / "ragged_batch_module", tmp_path / "work")
    program = work / "program.py"
    program.write_text(program.read_text().replace("torch.compile(net)", "torch.compile(net, dynamic=False)"))
    for backend, safety, because in (("inductor", Safety.UNSAFE, TRADE_OFF), ("eager", Safety.SAFE, TRADE_OFF)):
        profile = Profile.load(work / "profile.json")
        for frame in profile.frames:
            for compile_ in frame.compiles:
                compile_.backend = backend
        (finding,) = plan(profile, Project(work), (rule_by_id("RF001"),))
        assert finding.safety is safety, finding.notes
        if safety is Safety.UNSAFE:
            assert finding.unsafe_because == because and "asks for `dynamic=False`" in finding.notes[-1]


@pytest.mark.slow
def test_a_mark_that_changes_nothing_alone_is_not_offered(tmp_path):
    """A trial's sentence embedder: the corpus embedded in a comprehension (no mark can go
    there), then the queries: their one compile came from sizes the corpus' graphs did not serve.
    Marked alone the queries' call still compiles once and the corpus' calls as before (3 -> 3),
    yet a safe `apply` wrote the mark. No fix there now, and the note says why; the
    comprehension's sizes get `dynamic=True` at the compile call instead (unproven)."""
    (tmp_path / "program.py").write_text(
        "import torch\n\n\n"
        '@torch.compile(backend="eager")\n'
        "def embed(x):\n"
        "    return x.softmax(-1).sum(-1)\n\n\n"
        "corpus = torch.cat([embed(torch.randn(8, n)) for n in (10, 12, 14)])\n"
        "queries = embed(torch.randn(5, 12))\n"
    )
    run_cli("profile", "--backend", "eager", "--", "python", "program.py", cwd=tmp_path, check=0)
    profile = Profile.load(tmp_path / ".recompile-fix" / "profile.json")
    findings = {f.location.line: f for f in plan(profile, Project(tmp_path), (rule_by_id("RF001"),))}
    # No mark can go in the comprehension: `dynamic=True` at the compile call, for `fix` to prove.
    dynamic = findings[4]
    assert dynamic.unproven and "comprehension" in dynamic.notes[0], dynamic.notes
    assert dynamic.message.endswith("where no mark can go: compile it with `dynamic=True`"), dynamic.message
    assert findings[10].safety is Safety.NONE, findings[10].notes
    assert findings[10].notes == [
        "marked alone it changes nothing: this call compiles once, and the call at line 9, which passes "
        "them too, gets no mark (see its finding)"
    ]


def test_tensors_library_code_passes_share_one_note():
    """A generate() call passes a dozen tensors the user's code does not hold: one note names
    them (the first four, then how many more) and says why once; a lone one keeps its own."""
    from recompile_fix.rules.rf001_mark_dynamic.marks import unheld_notes

    why = (
        "library code (`_prefill` at g.py:1) passes `{}`; the user's code does not hold it (it is a copy or made there)"
    )
    sources = ["kwargs['input_ids']", "kwargs['position_ids']"] + [
        f"kwargs['cache'].layers[{i}].keys" for i in range(4)
    ]
    unheld = [(src, d, why.format(src)) for src in sources for d in (0, 2)]
    (note,) = unheld_notes(unheld)
    assert note.startswith("`kwargs['input_ids']` dim 0, 2, `kwargs['position_ids']` dim 0, 2, ")
    assert "and 2 more change with them" in note and note.count("library code") == 1
    assert "passes each of them; the user's code holds none of them" in note and "`{}`" not in note
    (alone,) = unheld_notes(unheld[:1])
    assert alone.startswith("`kwargs['input_ids']` dim 0 changes with them, but library code")
    assert "passes `kwargs['input_ids']`; the user's code does not hold it" in alone


@pytest.mark.slow
def test_no_mark_goes_inside_a_function_the_run_compiled(tmp_path):
    """A trial's GPT-2 curriculum: `@torch.compile def compute_loss(...)` called a model whose
    graph breaks made its `forward` a frame of its own; the `[*]` mark RF001 wrote before that
    call, inside `compute_loss`, made the program fail. No mark there: the finding says why, and
    `apply` leaves a program that runs."""
    shutil.copy(PROGRAMS / "rf001" / "call_inside_compiled.py", tmp_path / "prog.py")
    run_cli("profile", "--", "python", "prog.py", cwd=tmp_path, check=0)
    report = run_cli("report", cwd=tmp_path, check=0).stdout
    assert "the call is inside `compute`, which torch compiles: no mark can run in traced code" in report, report
    assert "RF001 [*]" not in report, report
    run_cli("apply", ".", cwd=tmp_path, check=0)
    assert "mark_dynamic" not in (tmp_path / "prog.py").read_text()
    ran = run_python("prog.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
