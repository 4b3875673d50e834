"""A Profile is untrusted input (issue 32, items 1, 2 and 7): the README tells CI users to commit
theirs, so a hostile one names whatever it likes. It must never show a line of a file it names
unless that file is a regular file of the project or the libraries with the bytes it hashed,
never read a device, a FIFO or /proc, never read without a bound, and every damaged one is one
line and exit code 2 (the audit: a Profile naming /proc/self/environ put the CI's token in the
page, /dev/zero read 22.5 GB, a FIFO blocked for good, 200,000 brackets and a NUL crashed)."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import HELPERS, MAIN, ROOT
from recompile_fix.profile.files import UnsafeFile, place_named_file, read_bounded, read_named_file

PROFILE = os.path.join(".recompile-fix", "profile.json")
SECRET = "rf-untrusted-marker-5c1e7"


def _cli(project, *args, env=None, timeout=120):
    """`recompile-fix ARGS` in ``project``; a hang fails the test (killed at ``timeout``)."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "recompile_fix", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    result.seconds = time.monotonic() - started  # type: ignore[attr-defined]
    return result


def _edit(project, change):
    path = project / PROFILE
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _fn(data):
    return next(f for f in data["frames"] if f["name"] == "fn")


def _name_in_stack(path, line=1, digest="0" * 64):
    def change(data):
        location = _fn(data)["compiles"][0]["stack"][0]
        location.update(file=path, line=line, end_line=line, col=0, end_col=5)
        data["sources"][path] = digest

    return change


def _one_error_line(result, *words):
    assert result.returncode == 2, (result.stdout, result.stderr)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("recompile-fix: error: "), line
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in line, line
    return line


def _untouched(project):
    assert (project / "main.py").read_text() == MAIN and (project / "helpers.py").read_text() == HELPERS


# -- item 1: no line of a file the Profile names, unless it is the file it hashed ----------------
def test_proc_self_environ_in_a_stack_puts_no_secret_in_the_page(project):
    _edit(project, _name_in_stack("/proc/self/environ"))
    result = _cli(project, "report", "--html", "page.html", env={"RF_TEST_TOKEN": SECRET})
    _one_error_line(result, "'/proc/self/environ' names a system file")
    page = project / "page.html"
    assert not page.exists() or SECRET not in page.read_text()
    assert SECRET not in result.stdout + result.stderr


def test_a_file_whose_bytes_are_not_the_ones_hashed_shows_no_line_in_the_page(project):
    """The hash is checked before a line is shown: a project file the Profile names with a hash
    it never had (a committed Profile pointing at a key file) puts nothing of it in the page."""
    (project / "secret.py").write_text(f"TOKEN = '{SECRET}'\n")
    _edit(project, _name_in_stack("secret.py"))
    result = _cli(project, "report", "--html", "page.html")
    assert result.returncode == 0, result.stderr
    assert SECRET not in (project / "page.html").read_text()
    # The same file with its real hash is the project's own code, and shown.
    import hashlib

    _edit(project, _name_in_stack("secret.py", digest=hashlib.sha256((project / "secret.py").read_bytes()).hexdigest()))
    result = _cli(project, "report", "--html", "page.html")
    assert result.returncode == 0, result.stderr
    assert SECRET in (project / "page.html").read_text()


# -- item 2: files that never end ---------------------------------------------------------------
@pytest.mark.parametrize("command", [("apply", "."), ("report", "--html", "page.html")])
def test_dev_zero_as_a_frame_file_is_one_line_and_fast(project, command):
    _edit(project, _name_in_stack("/dev/zero"))
    result = _cli(project, *command, timeout=60)
    _one_error_line(result, "'/dev/zero' names a system file")
    _untouched(project)


def test_a_py_link_to_dev_zero_in_the_tree_is_one_line_and_fast(project):
    os.symlink("/dev/zero", project / "zero.py")
    _edit(project, _name_in_stack("zero.py"))
    for command in (("apply", "."), ("report", "--html", "page.html")):
        _one_error_line(_cli(project, *command, timeout=60), "'zero.py' is a link to '/dev/zero'")
    _untouched(project)


def test_a_py_link_to_dev_zero_the_profile_does_not_name_is_not_read(project):
    """Static mode walks the tree: a link to a device is no source file."""
    os.symlink("/dev/zero", project / "zero.py")
    result = _cli(project, "apply", "--diff", ".", timeout=60)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr


def test_a_profile_linked_to_dev_zero_is_one_line(project):
    (project / PROFILE).unlink()
    os.symlink("/dev/zero", project / PROFILE)
    for command in (("apply", "."), ("report",)):
        _one_error_line(_cli(project, *command, timeout=60), "cannot read Profile: not a regular file")


def test_a_fifo_as_the_profile_is_one_line_not_a_hang(project):
    (project / PROFILE).unlink()
    os.mkfifo(project / PROFILE)
    for command in (("apply", "."), ("report",)):
        _one_error_line(_cli(project, *command, timeout=60), "cannot read Profile: not a regular file")


def test_a_fifo_named_pipe_py_is_not_read(project):
    os.mkfifo(project / "pipe.py")
    _edit(project, _name_in_stack("pipe.py"))
    for command in (("apply", "."), ("report", "--html", "page.html")):
        _one_error_line(_cli(project, *command, timeout=60), "'pipe.py' names no regular file")
    _untouched(project)


def test_a_link_out_of_the_project_is_never_read(project, tmp_path):
    """A project path that leads out of the project is not read, not even with the hash it has
    there: the page shows none of it."""
    import hashlib

    (tmp_path / "elsewhere.py").write_text(f"TOKEN = '{SECRET}'\n")
    os.symlink(tmp_path / "elsewhere.py", project / "out.py")
    digest = hashlib.sha256((tmp_path / "elsewhere.py").read_bytes()).hexdigest()
    _edit(project, _name_in_stack("out.py", digest=digest))
    result = _cli(project, "report", "--html", "page.html")
    _one_error_line(result, "'out.py' is a link to", "out of the project")
    assert not (project / "page.html").exists() and SECRET not in result.stdout


@pytest.mark.slow  # an input made to be large: seconds, no torch
def test_a_padded_profile_of_15000_frames_ends_fast(project):
    """The audit's 28 MB Profile of 15,000 frames ran for more than 900 s (3,405 "overlaps
    another fix" lines): the recorder keeps one frame per code object, so the copies are damage."""

    def pad(data):
        frames = []
        for k in range(15_000):
            frame = json.loads(json.dumps(data["frames"][k % 2]))
            for i, compile_ in enumerate(frame["compiles"]):
                compile_["id"] = f"{k}/{i}"
                for reason in compile_["reasons"]:
                    reason["entry"] = f"{k}/0"
                    reason["text"] = f"{k}/0:" + reason["text"].split(":", 1)[1]
            frames.append(frame)
        data["frames"] = frames

    _edit(project, pad)
    assert (project / PROFILE).stat().st_size > 10_000_000
    result = _cli(project, "apply", ".", timeout=300)
    _one_error_line(result, "frames[2] and frames[0] are the same code (`gn` at helpers.py:4)")
    assert result.seconds < 120, result.seconds  # type: ignore[attr-defined]
    _untouched(project)


# -- item 7: tracebacks and split lines ------------------------------------------------------------
@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 200_000 + "]" * 200_000, "nested 200000 deep"),
        (
            '{"schema": "recompile-fix/profile", "schema_version": 1, "frames": [{"first_line": ' + "9" * 5000 + "}]}",
            "damaged Profile",
        ),
    ],
    ids=["200000 brackets", "a 5000-digit number"],
)
def test_json_that_crashed_the_reader_is_one_line(project, text, words):
    (project / PROFILE).write_text(text)
    for command in (("apply", "."), ("report",)):
        _one_error_line(_cli(project, *command), words)
    _untouched(project)


def test_a_4000_digit_line_number_is_one_short_line(project):
    def change(data):
        _fn(data)["compiles"][0]["stack"][0]["line"] = int("9" * 4000)

    _edit(project, change)
    line = _one_error_line(_cli(project, "apply", "."), "a number of 4000 digits, outside 1..")
    assert len(line) < 300


@pytest.mark.parametrize("path", ["ma\x00in.py", "ma\nin.py", "main.py\r"], ids=["NUL", "newline", "return"])
def test_a_path_with_a_control_character_is_one_line(project, path):
    _edit(project, _name_in_stack(path))
    for command in (("apply", "."), ("report",)):
        _one_error_line(_cli(project, *command), "a path with a control character", repr(path))
    _untouched(project)


# -- the reader itself ---------------------------------------------------------------------------
def test_the_reader_refuses_what_is_no_regular_file_of_the_project(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    os.symlink("/etc/passwd", tmp_path / "out.py")
    os.mkfifo(tmp_path / "pipe.py")
    assert read_named_file("ok.py", tmp_path) == b"x = 1\n"
    started = time.monotonic()
    for name, words in [
        ("zero.py", "a system file"),
        ("/proc/self/environ", "a system file"),
        ("out.py", "outside the project"),
        ("/etc/passwd", "outside the project"),
        ("pipe.py", "not a regular file"),
        ("ok\x00.py", "control character"),
    ]:
        with pytest.raises(UnsafeFile, match=words):
            read_named_file(name, tmp_path)
    for device in ("/dev/zero", tmp_path / "pipe.py"):
        with pytest.raises(UnsafeFile, match="not a regular file"):
            read_bounded(device)
    assert time.monotonic() - started < 5
    with pytest.raises(UnsafeFile, match="not the bytes the Profile hashed"):
        read_named_file("ok.py", tmp_path, expected="0" * 64, checked=True)
    (tmp_path / "big.py").write_bytes(b"#" * 2048)
    with pytest.raises(UnsafeFile, match="larger than"):
        read_bounded(tmp_path / "big.py", limit=1024)
    # A library file is read from the interpreter's directories, as the Profile spells it.
    assert place_named_file("/stdlib/json/decoder.py", tmp_path).is_file()


def test_a_recorded_interpreter_does_not_open_other_directories(tmp_path):
    """A Profile's interpreter is data too: a prefix or site of /home or / lets nothing be read."""
    from recompile_fix.profile.libraries import Interpreter

    hostile = Interpreter(prefix="/", site=["/etc"], stdlib=["/etc"])
    for path in ("/site-packages/hostname", "/python-prefix/etc/passwd", "/stdlib/hostname"):
        with pytest.raises(OSError):
            read_named_file(path, tmp_path, hostile)
    assert (ROOT / "recompile_fix").is_dir()
