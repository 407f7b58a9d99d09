"""runner/cancel.py: which processes a cancel stops (the whole tree under the factory, read from
/proc), and which build failures are the cancel's doing rather than the build's."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from wheelfactory.runner.cancel import Cancel, descendants
from wheelfactory.support.proc import CommandFailed


def test_the_tree_under_a_process_is_found_grandchildren_included() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(descendants(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchildren = descendants(child.pid)
        assert len(grandchildren) == 2
        assert {child.pid, *grandchildren} <= set(descendants(os.getpid()))
    finally:
        for pid in [*descendants(child.pid), child.pid]:
            os.kill(pid, signal.SIGKILL)
        child.wait()


def test_a_fake_proc_with_odd_process_names_is_read(tmp_path: Path) -> None:
    for pid, ppid, name in ((10, 1, "factory"), (11, 10, "python (build) x"), (12, 11, "cc1plus"), (13, 1, "other")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} 0 0\n")
    assert sorted(descendants(10, tmp_path)) == [11, 12]


def test_a_failure_is_the_cancels_only_when_the_run_is_cancelled() -> None:
    cancel = Cancel()
    assert not cancel.caused(CommandFailed(["cc"], 1, "", None))  # a compile error, no waiting
    assert not cancel.caused(CommandFailed(["cc"], -signal.SIGINT, "", None))  # a signal nobody sent us
    threading.Timer(0.2, cancel.event.set).start()  # the handler runs a moment after the child died
    assert cancel.caused(CommandFailed(["cc"], -signal.SIGINT, "", None))
    assert cancel.caused(ValueError("anything, once cancelled"))


def test_the_exit_codes_of_a_cancel_are_in_the_readmes_table() -> None:
    import re

    from tests.testkit import REPO, markdown_section
    from wheelfactory.runner.cancel import EXIT_CODES

    table = markdown_section((REPO / "README.md").read_text(), "## Exit codes")
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert set(EXIT_CODES.values()) == {130, 143} and set(EXIT_CODES.values()) <= documented
