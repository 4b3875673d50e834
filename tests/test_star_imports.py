"""Class resolution through star imports (issue 30, cause 8): ``from .base import *`` binds what
the module's ``__all__`` lists (or, without one, its public names), so a class whose base comes in
that way is known to be an nn.Module, and one ``__all__`` leaves out is not resolved through it."""

import textwrap

import libcst as cst
import pytest

from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.project import Project

FILES = {
    "models/base.py": """
        from torch import nn

        __all__ = ["Base"]
        __all__ += ["Extended"]

        class Base(nn.Module):
            pass

        class Extended(nn.Module):
            pass

        class Hidden(nn.Module):  # public, but not in __all__
            pass
    """,
    "models/plain.py": """
        class Base:  # a star import after base's rebinds `Base` to this one
            pass

        class _Private:
            pass

        class Public:
            pass
    """,
    "models/__init__.py": """
        from .base import *
    """,
    "models/net.py": """
        from .base import *

        class Net(Base):
            pass

        class Wider(Extended):
            pass

        class Secret(Hidden):
            pass
    """,
    "models/shadowed.py": """
        from .base import *
        from .plain import *

        class Shadowed(Base):
            pass

        class Private(_Private):
            pass

        class Open(Public):
            pass
    """,
    "train.py": """
        from models import *

        class Top(Base):
            pass
    """,
}


@pytest.fixture
def project(tmp_path):
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return Project(tmp_path, expected_hashes={})


def _ref(project, file, name):
    source = project.read_only(file)
    node = next(n for n in source.nodes(cst.ClassDef) if n.name.value == name)
    return ClassRef(file, source, node)


@pytest.mark.parametrize(
    "file, name, verdict, why",
    [
        ("models/net.py", "Net", True, "`Net` derives from `Base` (models/base.py)"),
        ("models/net.py", "Wider", True, "`Wider` derives from `Extended` (models/base.py)"),  # __all__ +=
        # Hidden is not in __all__: the star import does not bind it.
        ("models/net.py", "Secret", None, "`Secret` derives from `Hidden`, whose source is not in the project"),
        ("models/shadowed.py", "Shadowed", False, "`Shadowed` is not an nn.Module"),  # plain's Base wins
        ("models/shadowed.py", "Private", None, "`Private` derives from `_Private`"),  # no __all__: not public
        ("models/shadowed.py", "Open", False, "`Open` is not an nn.Module"),
        ("train.py", "Top", True, "`Top` derives from `Base` (models/base.py)"),  # through the package
    ],
)
def test_is_module_follows_star_imports(project, file, name, verdict, why):
    got, reason = ClassIndex(project).is_module(_ref(project, file, name))
    assert got is verdict, reason
    assert reason.startswith(why), reason


def test_resolve_through_a_star_import_names_the_defining_file(project):
    found = ClassIndex(project).resolve("train.py", "Base")
    assert found is not None and (found.file, found.name) == ("models/base.py", "Base")
    assert ClassIndex(project).resolve("models/net.py", "Hidden") is None
