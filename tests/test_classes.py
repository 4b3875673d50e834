"""Classes resolved across the project's files (recompile_fix.analysis.classes): imports followed
(absolute, relative, module aliases, re-exports), bases in other modules, methods inherited from
them; "is not an nn.Module" only when true."""

import textwrap

import libcst as cst
import pytest

from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.scalar_uses import TENSOR, ScalarUses
from recompile_fix.profile.model import sha256_bytes

FILES = {
    "models/base.py": """
        from torch import nn

        class Base(nn.Module):
            def scale(self, x, c):
                return x * c
    """,
    "models/__init__.py": """
        from .base import Base as ReExported
    """,
    "models/blocks.py": """
        from . import base
        from .base import Base

        class Block(base.Base):
            def forward(self, x, c):
                return x + c

        class Plain:
            pass

        class Odd(Plain):
            pass
    """,
    "train.py": """
        import models.blocks as mb
        from models import ReExported
        from models.blocks import Block, Odd
        from transformers import PreTrainedModel

        class Net(Block):
            def __init__(self):
                super().__init__()
                self.inner = mb.Block()

            def forward(self, x, c):
                return self.scale(x, c) + self.inner(x, c)

        class Wrapper(ReExported):
            pass

        class Hf(PreTrainedModel):
            pass

        class NotModule(Odd):
            pass
    """,
}


@pytest.fixture
def project(tmp_path):
    hashes = {}
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = textwrap.dedent(text).lstrip("\n")
        path.write_text(data)
        if name == "train.py":  # only the file the Profile named is hashed; the rest is read as it is
            hashes[name] = sha256_bytes(data.encode())
    return Project(tmp_path, expected_hashes=hashes)


def ref(project, file, name):
    source = project.source(file) or project.read_only(file)
    node = next(n for n in source.nodes(cst.ClassDef) if n.name.value == name)
    return ClassRef(file, source, node)


@pytest.mark.parametrize(
    "name, verdict, why",
    [
        ("Net", True, "`Net` derives from `Block` (models/blocks.py), and `Block` derives from `Base`"),
        ("Wrapper", True, "`Wrapper` derives from `Base` (models/base.py)"),  # re-exported by models/__init__.py
        ("Hf", None, "`Hf` derives from `transformers.PreTrainedModel`, whose source is not in the project"),
        ("NotModule", False, "`NotModule` is not an nn.Module"),
    ],
)
def test_is_module_follows_bases_across_files(project, name, verdict, why):
    got, reason = ClassIndex(project).is_module(ref(project, "train.py", name))
    assert got is verdict
    assert reason.startswith(why), reason


def test_resolve_and_inherited_methods(project):
    classes = ClassIndex(project)
    assert classes.resolve("train.py", "mb.Block").file == "models/blocks.py"
    assert classes.resolve("models/blocks.py", "base.Base").file == "models/base.py"
    owner, method = classes.method(ref(project, "train.py", "Net"), "scale")
    assert owner.name == "Base" and method.name.value == "scale"


def test_scalar_uses_follow_inherited_methods_and_imported_submodules(project):
    source = project.source("train.py")
    forward = next(n for n in source.nodes(cst.FunctionDef) if n.name.value == "forward")
    alone = ScalarUses(read=project.source).of_parameter(source, "train.py", forward, "c", {"x"})
    across = ScalarUses(read=project.source, classes=ClassIndex(project)).of_parameter(
        source, "train.py", forward, "c", {"x"}
    )
    assert {u.verdict for u in alone} == {"unknown"}  # without the other files: cannot tell
    assert [(u.verdict, u.file) for u in across] == [(TENSOR, "models/base.py"), (TENSOR, "models/blocks.py")]


def test_read_only_stays_inside_the_root(project, tmp_path):
    assert project.read_only("../outside.py") is None
    assert project.read_only(str(tmp_path / "train.py")) is None  # absolute: not a project path
    assert project.read_only("models/base.py") is not None


def test_a_module_imported_from_a_library_file_is_looked_for_in_finitely_many_places(project):
    """A library file's spelling (`/site-packages/...`) as the importer: the walk up its folders
    never reached "" and looped for ever (a trial's report took 14 GB before it was stopped)."""
    classes = ClassIndex(project)
    assert classes.module_file("/site-packages/transformers/models/llama/modeling_llama.py", "configuration") is None
    assert classes.resolve("/site-packages/transformers/models/llama/modeling_llama.py", "LlamaModel") is None
