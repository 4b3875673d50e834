"""A library file (an absolute Profile path) is parsed once per process for the same bytes: every
Project a process builds (an editor's server on each change, a plan per torch release) shares it;
other bytes at the same path are parsed anew. A project file is shared only while its text is
the same (SourceFile.parse keeps the files it parsed lately): its new text is parsed anew."""

from recompile_fix.analysis.project import Project


def test_the_same_library_bytes_are_parsed_once_and_new_bytes_again(tmp_path):
    library = tmp_path / "site-packages" / "lib.py"
    library.parent.mkdir()
    library.write_text("def forward(x):\n    return x\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("x = 1\n")

    def read(path):  # the interpreter's libraries are elsewhere: read this one where it is
        return (project / path).read_bytes() if not path.startswith("/") else open(path, "rb").read()

    first, second = Project(project, read=read), Project(project, read=read)
    path = str(library)
    assert first.source(path) is not None
    assert first.source(path) is second.source(path)
    assert first.source("train.py") is second.source("train.py")  # the same text: one parse
    (project / "train.py").write_text("x = 2\n")
    edited = Project(project, read=read).source("train.py")
    assert edited is not None and edited is not first.source("train.py") and edited.text == "x = 2\n"
    library.write_text("def forward(x):\n    return x + 1\n")
    third = Project(project, read=read)
    changed = third.source(path)
    assert changed is not None and changed is not first.source(path)
    assert "x + 1" in changed.text
