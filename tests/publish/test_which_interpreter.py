"""`wheelfactory which --python PY` where PY is no Python interpreter: one line naming it, exit 2,
instead of taking whatever the program prints for an answer."""

from __future__ import annotations

import sys
import os
from pathlib import Path

import pytest
from tests.testkit import run_cli
from wheelfactory.publish import selector

HINT = "give the interpreter of the environment you install into, e.g. --python .venv/bin/python"


def script(tmp_path: Path, name: str, body: str, mode: int = 0o755) -> str:
    path = tmp_path / name
    path.write_text(body)
    path.chmod(mode)
    return str(path)


def which_error(capsys: pytest.CaptureFixture[str], python: str) -> str:
    assert run_cli("which", "--index", "/nonexistent-index", "--python", python) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and "Traceback" not in out.err, out
    assert out.err.startswith(f"wheelfactory: error: --python {python}: ") and out.err.rstrip().endswith(HINT)
    return out.err


def test_echo_is_not_an_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    err = which_error(capsys, "/bin/echo")
    assert "not a Python 3 interpreter (a one-line test printed \"-c import sys;" in err


def test_a_program_that_prints_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = script(tmp_path, "garbage", "#!/bin/sh\nprintf 'pip install --index-url http://x y\\n\\001\\377'\n")
    assert "not a Python 3 interpreter (a one-line test printed 'pip install --index-url" in which_error(capsys, garbage)
    silent = script(tmp_path, "silent", "#!/bin/sh\nexit 0\n")
    assert "(a one-line test printed 'nothing')" in which_error(capsys, silent)


def test_a_program_that_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "exited 1 on a one-line Python test" in which_error(capsys, "/bin/false")
    crashing = script(tmp_path, "crash", "#!/bin/sh\necho oops >&2\nexit 3\n")
    assert "exited 3 on a one-line Python test, so it is not a working Python interpreter" in which_error(
        capsys, crashing)


def test_a_program_that_does_not_exist_or_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "cannot run it (No such file or directory)" in which_error(capsys, str(tmp_path / "python9"))
    assert "cannot run it (Permission denied)" in which_error(capsys, script(tmp_path, "plain", "text\n", 0o644))
    assert "cannot run it (Permission denied)" in which_error(capsys, str(tmp_path))  # a directory


def test_a_hung_program_times_out(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selector, "_PROBE_SECONDS", 0.5)
    hung = script(tmp_path, "hung", "#!/bin/sh\nexec sleep 30\n")
    assert "no answer to a one-line Python test in 0.5 s" in which_error(capsys, hung)


def test_a_real_interpreter_passes_the_probe() -> None:
    selector.check_interpreter(sys.executable)  # no error


def test_which_exit_codes_follow_the_table(tmp_path: Path) -> None:
    """Nothing listening at --index (even a 300-character one) is bad input, 2, in one line; an
    interpreter without torch lacks what the answer needs, 9. Neither is 1, a failed build's code."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for index in (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/{'a' * 300}"):
        done = subprocess.run([sys.executable, "-m", "wheelfactory", "which", "--index", index], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot read" in lines[0] and len(lines[0]) < 300, lines
    from tests.publish.dist_fakes import make_dist
    from tests.publish.test_index import index as write_index

    dist, bare = tmp_path / "dist", tmp_path / "bare"
    dist.mkdir()
    make_dist(dist)
    write_index(dist)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    done = subprocess.run([sys.executable, "-m", "wheelfactory", "which", "--python", str(bare / "bin" / "python"),
                           "--index", str(dist)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stdout + done.stderr
    assert "torch is not installed" in done.stderr and "Traceback" not in done.stderr


def test_which_into_a_full_device_or_a_closed_pipe_is_never_a_traceback(tmp_path: Path) -> None:
    """The selector's answer into /dev/full: one line and 9; into a pipe whose reader is gone
    (`| head -c0`): quiet, 141 (what a Unix tool killed by SIGPIPE reports)."""
    import subprocess
    import sys

    from tests.publish.dist_fakes import make_dist
    from tests.publish.test_index import index as write_index

    dist = tmp_path / "dist"
    dist.mkdir()
    make_dist(dist)
    write_index(dist)
    command = [sys.executable, "-m", "wheelfactory", "which", "--index", str(dist)]
    for quiet in ([], ["--quiet"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(command + quiet, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        assert done.returncode == 9, done.stderr
        assert done.stderr.strip().splitlines() == ["select: cannot write standard output: No space left on device"]
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before anything is written
    try:
        done = subprocess.run(command, stdout=writer, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)
    assert done.returncode == 141 and "Traceback" not in done.stderr, done.stderr


def test_which_refuses_an_index_of_another_project(tmp_path: Path) -> None:
    """`which` against another project's index (what answered on the default port was another
    project's `serve`): one line naming both projects, exit 2; the right name passes."""
    import subprocess
    import sys

    from tests.publish.dist_fakes import make_dist
    from tests.publish.test_index import index as write_index

    dist = tmp_path / "dist"
    dist.mkdir()
    make_dist(dist)  # project "tiny"
    write_index(dist)
    command = [sys.executable, "-m", "wheelfactory", "which", "--index", str(dist), "--project"]
    other = subprocess.run([*command, "mykernels"], capture_output=True, text=True, timeout=120)
    assert other.returncode == 2 and "Traceback" not in other.stderr, other.stdout + other.stderr
    (line,) = other.stderr.strip().splitlines()
    assert "serves tiny, not mykernels" in line, line
    same = subprocess.run([*command, "Tiny"], capture_output=True, text=True, timeout=120)  # names compare as PEP 503's
    assert "serves tiny, not" not in same.stderr, same.stderr


def test_the_project_which_holds_the_default_index_to_is_the_one_this_directory_builds(tmp_path: Path) -> None:
    from wheelfactory.project.scaffold import plan_scaffold, write_scaffold

    assert selector.project_here(write_scaffold(plan_scaffold("mykernels"), tmp_path / "k")) == "mykernels"
    byo = tmp_path / "byo"
    (byo / "proj").mkdir(parents=True)
    (byo / "proj" / "pyproject.toml").write_text('[project]\nname = "torch-thing"\n')
    (byo / "matrix.toml").write_text('[project]\npath = "proj"\n')
    assert selector.project_here(byo) == "torch-thing"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "pyproject.toml").write_text('[project]\nname = "my-app"\n')  # a consumer, not a kernel
    assert selector.project_here(tmp_path / "app") is None
