"""SourceFile.function_def finds a code object's def without libcst's positions (a library file's
cost a third of a second each), and finds the same def, and the same enclosing class, as the
lookup by positions does."""

import ast
import textwrap

import libcst as cst

from recompile_fix.analysis.source import SourceFile

PROGRAM = textwrap.dedent(
    """\
    import functools


    def step(x):
        return x


    class Outer:
        @functools.wraps(step)
        @staticmethod
        def step(x):
            def inner(y):
                class Local:
                    def step(self):
                        return 1
                return Local
            return inner

        async def fetch(self):
            return 2

        class Inner:
            def step(self):
                if True:
                    def hidden():
                        return 3
                elif False:
                    def hidden():
                        return 4
                else:
                    pass
                try:
                    def in_try():
                        return 5
                except ValueError:
                    def in_except():
                        return 6
                finally:
                    def in_finally():
                        return 7
                for _ in range(1):
                    pass
                else:
                    def after_for():
                        return 8
                match 1:
                    case 1:
                        def in_case():
                            return 9
                with open(__file__) as f:
                    def in_with():
                        return f
    """
)


def _code_objects():
    """(co_firstlineno, name) of every def, as CPython records them (the first decorator's line)."""
    tree = ast.parse(PROGRAM)
    return [
        (node.decorator_list[0].lineno if node.decorator_list else node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_the_def_and_its_class_are_the_ones_positions_find(tmp_path):
    fast = SourceFile.parse(tmp_path / "m.py", PROGRAM)
    slow = SourceFile.parse(tmp_path / "m.py", PROGRAM)
    assert slow.positions and slow.parents  # the lookup by positions
    code_objects = _code_objects()
    assert len(code_objects) == 14
    for first_line, name in code_objects:
        found, expected = fast.function_def(first_line, name), slow.function_def(first_line, name)
        assert expected is not None and found is not None, (first_line, name)
        assert fast.code(found) == slow.code(expected), (first_line, name)
        found_class, expected_class = fast.enclosing_class(found), slow.enclosing_class(expected)
        assert (found_class and found_class.name.value) == (expected_class and expected_class.name.value)
    assert "positions" not in fast.__dict__ or fast.function_def(1, "nothing") is None


def test_a_line_that_starts_no_def_finds_none(tmp_path):
    source = SourceFile.parse(tmp_path / "m.py", PROGRAM)
    assert source.function_def(5, "step") is None  # the body's line, not the def's
    assert source.function_def(4, "missing") is None
    assert isinstance(source.function_def(4, "step"), cst.FunctionDef)
    assert "positions" not in source.__dict__
