"""Damaged and hand-edited Profiles: exit 2 and one line, nothing written, never a traceback and
never other edits (of 144 corrupted Profiles, 38 gave a ~40-line traceback and 17 wrote different
edits: the wrong call, `mark_dynamic(x, [0, 99])`, fewer fixes). tests/test_fuzz_profiles.py
mutates real Profiles at random; these are the named cases."""

import json
import re

import pytest

from conftest import HELPERS, MAIN, ROOT, run_cli
from recompile_fix.errors import UserError
from recompile_fix.profile.model import Profile
from recompile_fix.profile.validate import check_agreement


def _edit(project, change):
    path = project / ".recompile-fix" / "profile.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _frame(data, name):
    return next(f for f in data["frames"] if f["name"] == name)


def _set(path_in, value):
    def change(data):
        target = data
        for key in path_in[:-1]:
            if key in ("fn", "gn"):  # a frame, by name
                target = next(f for f in target if f["name"] == key)
            else:
                target = target[key]
        target[path_in[-1]] = value

    return change


CASES = {
    "schema version as a string": (
        _set(["schema_version"], "1"),
        "Profile schema_version is the string '1'; this recompile-fix reads the number 1",
    ),
    "a dimension beyond the rank": (
        _set(["frames", "fn", "compiles", 1, "reasons", 0, "dim"], 99),
        "is 99, outside 0..63",
    ),
    "a dimension within torch's limit, beyond the recorded rank": (
        lambda d: _frame(d, "fn")["compiles"][1]["reasons"][0].update(
            dim=1, text=_frame(d, "fn")["compiles"][1]["reasons"][0]["text"].replace("index 0", "index 1")
        ),
        "names dimension 1 of `x`, recorded with 1 dimensions",
    ),
    "a typed dimension its text does not say": (
        lambda d: _frame(d, "gn")["compiles"][1]["reasons"][0].update(dim=1),
        "says source='y', dim=1, expected=6, actual=7, but its text says source='y', dim=0",
    ),
    "a size the compile did not record": (
        lambda d: _frame(d, "fn")["compiles"][0]["inputs"]["x"].update(shape=[1]),
        "says `x` had size 3 in dimension 0; the compile recorded [1]",
    ),
    "a line given as a string": (
        _set(["frames", "fn", "compiles", 0, "stack", 0, "line"], "12"),
        ".line is '12', not an integer",
    ),
    "a negative column": (
        _set(["frames", "fn", "compiles", 0, "stack", 0, "col"], -4),
        ".col is -4, outside 0..100000",
    ),
    "NaN seconds": (
        _set(["frames", "fn", "compiles", 0, "seconds", "dynamo"], float("nan")),
        "is nan, not a number of seconds",
    ),
    "frames not a list": (_set(["frames"], {"0": 1}), "frames is dict, not a list"),
    "a hash that is not sha256": (_set(["sources", "main.py"], "abc"), "is 'abc', not a sha256 digest"),
    "a path that leaves the project": (
        lambda d: d["sources"].update({"../outside.py": "0" * 64}),
        "the path '../outside.py' leaves the project",
    ),
    "a file without a hash": (
        _set(["frames", "fn", "file"], "other.py"),
        "names the file 'other.py', of which it records no hash",
    ),
    "a call site past the end of the file": (
        lambda d: _frame(d, "fn")["compiles"][0]["stack"][0].update(line=400, end_line=400),
        "names line 400 of main.py, which has 13 lines",
    ),
    "a span that is no expression (the wrong call)": (
        _set(["frames", "fn", "compiles", 0, "stack", 0, "end_col"], 9),
        "names main.py:12:4, no expression there",
    ),
    "a frame at a line where its def is not": (
        _set(["frames", "fn", "first_line"], 3),
        "frame `fn` names line 3 of main.py: no such def there",
    ),
    # Found by the longer round of tests/test_fuzz_profiles.py: which mark RF001 writes depends
    # on the torch version (findings/releases.py), so an empty one wrote another edit.
    "an empty torch version": (_set(["torch_version"], ""), "torch_version is '', not a torch version"),
    # Found by tests/test_fuzz_profiles.py in the quick lane: the compile ids order a frame's
    # compiles and link a guard to the entry it failed on, so `x` wrote fewer marks.
    "a compile id torch never gives": (
        _set(["frames", "fn", "compiles", 0, "id"], "x"),
        "is 'x', not a torch compile id (such as 0/1)",
    ),
    # The steady-state time chooses between RF004 and RF007 for inference.
    "a negative steady-state call": (
        _set(["frames", "fn", "steady"], {"calls": 3, "seconds": -0.5}),
        "steady.seconds is -0.5, below zero",
    ),
    "steady-state calls as text": (
        _set(["frames", "fn", "steady"], {"calls": "3", "seconds": 0.1}),
        "steady.calls is '3', not an integer",
    ),
    "a steady state of no calls": (
        _set(["frames", "fn", "steady"], {"calls": 0, "seconds": 0.1}),
        "steady.calls is 0, outside 1..",
    ),
    "negative steady-state CPU seconds": (
        _set(["frames", "fn", "steady"], {"calls": 2, "seconds": 0.1, "cpu_seconds": -1}),
        "steady.cpu_seconds is -1, below zero",
    ),
    "infinite steady-state seconds": (
        _set(["frames", "fn", "steady"], {"calls": 2, "seconds": float("inf")}),
        "steady.seconds is inf, not a number of seconds",
    ),
    # Issue 32: accepted, with other edits.
    "a shape of another rank than its stride": (
        lambda d: _frame(d, "fn")["compiles"][0]["inputs"]["x"].update(shape=[3, 1]),
        "has a shape of 2 dimensions and a stride of 1",
    ),
    "a traced dimension beyond the shape": (
        lambda d: _frame(d, "fn")["compiles"][1].update(dims={"x": [{"dim": 1, "state": "dynamic"}]}),
        "dims['x'] names dimension 1 of a tensor recorded with 1 dimensions",
    ),
    "an input renamed against the signature": (
        lambda d: _frame(d, "fn").update(signature={"positional": ["y"], "keyword_only": []}),
        "inputs['x'] is none of `fn`'s parameters (y)",
    ),
    "a marked dimension beyond the shape": (
        lambda d: _frame(d, "fn")["compiles"][0]["inputs"]["x"].update(marked=[3]),
        "marked[0] is 3, outside 0..0",
    ),
    "applied naming a file never profiled": (
        lambda d: d["applied"].update({"other.py": "0" * 64}),
        "applied names 'other.py', a file it records no profiled hash of",
    ),
    "a recompile reason of an unknown kind": (
        _set(["frames", "fn", "compiles", 1, "reasons", 0, "kind"], "guess"),
        "is 'guess', not a reason kind",
    ),
}


def _absolute_project_path(project):
    """The project's own file named by its absolute path (every stage takes an absolute path for
    code it never edits: RF001's fix went elsewhere)."""

    def change(data):
        absolute = str(project / "main.py")
        data["sources"][absolute] = data["sources"].pop("main.py")
        for frame in data["frames"]:
            frame["file"] = absolute if frame["file"] == "main.py" else frame["file"]
            for compile_ in frame["compiles"]:
                for location in compile_["stack"]:
                    location["file"] = absolute if location["file"] == "main.py" else location["file"]

    return change


@pytest.mark.parametrize("case", sorted(CASES) + ["the project's file by its absolute path"])
def test_a_damaged_profile_is_one_line_and_exit_2(project, case):
    if case in CASES:
        change, words = CASES[case]
    else:
        change, words = _absolute_project_path(project), "names a file of the project by its absolute path"
    _edit(project, change)
    for command in (["apply", "."], ["report"]):
        result = run_cli(*command, cwd=project)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("recompile-fix: error: ") and words in line, line
        assert "Traceback" not in result.stderr
    assert (project / "main.py").read_text() == MAIN and (project / "helpers.py").read_text() == HELPERS


def test_a_first_use_its_text_does_not_say_is_damaged():
    """Found by the longer round of tests/test_fuzz_profiles.py: a guard's first use moved to
    another line of the function (RF005 then placed its graph break after the wrong line)."""
    data = json.loads((ROOT / "golden" / "RF005" / "module_attribute_tail" / "profile.json").read_text())
    check_agreement(Profile.from_json(data))  # as recorded: agrees with itself
    reason = data["frames"][0]["compiles"][1]["reasons"][0]
    reason["first_use"]["line"] -= 1
    with pytest.raises(UserError, match=r"first used at line 14 in `forward`; its text says line 15 in `forward`"):
        check_agreement(Profile.from_json(data))


def _golden_profile(case: str) -> dict:
    return json.loads((ROOT / "golden" / case / "profile.json").read_text())


@pytest.mark.parametrize(
    "case, damage, words",
    [
        # A global guard whose value is gone: RF006 raised AttributeError on it.
        (
            "RF006/global_step_counter",
            lambda d: d["frames"][0]["compiles"][2]["reasons"][0].update(source=None),
            "names no value, but its text says `G['STEP']`",
        ),
        (
            "RF006/global_step_counter",
            lambda d: d["frames"][0]["compiles"][2]["reasons"][0].update(source="other"),
            "says `other`, but its text says `G['STEP']`",
        ),
        # A tensor recorded as another type: RF001 marked one dimension of two.
        (
            "RF001/several_dims",
            lambda d: d["frames"][0]["compiles"][0]["inputs"]["m"].update(type="x"),
            "inputs['m'] has a shape but type 'x'",
        ),
    ],
)
def test_more_damage_the_longer_fuzz_round_found(case, damage, words):
    """Found by a longer round of tests/test_fuzz_profiles.py (a crash, and another edit)."""
    data = _golden_profile(case)
    check_agreement(Profile.from_json(data))
    damage(data)
    with pytest.raises(UserError, match=re.escape(words)):
        check_agreement(Profile.from_json(data))


def test_a_module_record_of_another_type_is_damaged():
    """A recorded module (its class named) whose type says otherwise: RF010 would silently drop
    its fix (the longer fuzz round: `frames[0].compiles[0].inputs['self'].type` changed)."""
    data = json.loads((ROOT / "golden" / "RF010" / "library_problem_type_hidden" / "profile.json").read_text())
    check_agreement(Profile.from_json(json.loads(json.dumps(data))))
    data["frames"][0]["compiles"][0]["inputs"]["self"]["type"] = "Modulx"
    with pytest.raises(UserError, match=r"inputs\['self'\] names a module class but type 'Modulx'"):
        check_agreement(Profile.from_json(data))


def test_a_guard_on_arithmetic_of_a_number_is_no_damage():
    """A trial's PPO loss under a cold inductor cache: torch guarded `(1.0 + clip_range) == 1.15`
    (inductor's float tensorify pass), which keeps no value of `clip_range` itself; `report`
    refused the Profile `profile` had just written as damaged."""
    data = _golden_profile("RF002/two_annealed_scalars")
    reason = data["frames"][0]["compiles"][1]["reasons"][0]
    reason.update(text="0/0: (1.0 + tau) == 3.0", expression="(1.0 + tau)")
    del reason["value"], reason["first_use"]
    profile = Profile.from_json(data)
    check_agreement(profile)
    assert profile.frames[0].compiles[1].reasons[0].value is None
