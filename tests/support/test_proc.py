from __future__ import annotations

import sys
from pathlib import Path

import pytest
from wheelfactory.support.proc import CommandFailed, excerpt, run


def test_excerpt_keeps_the_real_error_above_the_tail() -> None:
    text = "\n".join(["building"] * 50 + ["g++: error: unrecognized option '-fno-x'"] + ["noise"] * 40 + ["done"])
    shown = excerpt(text, lines=20)
    assert shown.splitlines()[0] == "g++: error: unrecognized option '-fno-x'"
    assert shown.splitlines()[-1] == "done" and len(shown.splitlines()) <= 21


def test_excerpt_without_errors_is_the_tail() -> None:
    assert excerpt("\n".join(str(i) for i in range(100)), lines=5).splitlines() == ["95", "96", "97", "98", "99"]


def test_run_logs_the_command_and_raises_with_the_excerpt(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    assert run([sys.executable, "-c", "print('hello')"], log=log).strip() == "hello"
    with pytest.raises(CommandFailed) as info:
        run([sys.executable, "-c", "import sys; print('error: broken'); sys.exit(3)"], log=log)
    assert info.value.returncode == 3 and "error: broken" in info.value.tail
    text = log.read_text()
    assert text.count("$ ") == 2 and "hello" in text


def test_children_die_with_the_factory(tmp_path: Path) -> None:
    """A kill -9 of the factory takes its running commands with it (no orphan keeps writing)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from wheelfactory.support.proc import _pdeathsig_prefix

    if not _pdeathsig_prefix():
        pytest.skip("setpriv --pdeathsig is not available here")
    marker = tmp_path / "child.pid"
    code = ("import sys; from pathlib import Path; from wheelfactory.support.proc import run; "
            f"run(['sh', '-c', 'echo $$ > {marker}; exec sleep 300'], log=Path(sys.argv[1]))")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "log")])
    deadline = time.monotonic() + 60
    while not (marker.is_file() and marker.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(marker.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the child outlived the killed factory")


def test_run_returns_only_this_commands_output_after_non_ascii_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("✓ progress ━━━━ done ✓\n" * 50)  # 3-byte characters before this command
    assert run([sys.executable, "-c", "print('sm_80')"], log=log) == "sm_80\n"


def test_call_returns_how_a_command_ended_with_its_streams_apart() -> None:
    from wheelfactory.support.proc import call

    done = call([sys.executable, "-c", "import sys; print(sys.stdin.read() or 'closed'); "
                                       "sys.stderr.write('warned'); sys.exit(4)"])
    assert (done.returncode, done.stdout.strip(), done.stderr) == (4, "closed", "warned")  # stdin: nothing
    fed = call([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], input="fed")
    assert (fed.returncode, fed.stdout.strip()) == (0, "FED")


def test_call_untied_raises_for_a_program_that_cannot_run(tmp_path: Path) -> None:
    from wheelfactory.support.proc import call

    with pytest.raises(FileNotFoundError):
        call([str(tmp_path / "missing")], tied=False)
