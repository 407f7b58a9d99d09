from __future__ import annotations

import sys
from pathlib import Path

import pytest

from factory.proc import CommandFailed, excerpt, run


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
