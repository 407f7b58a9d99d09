"""An interrupt is a cancel: Ctrl-C (SIGINT) or SIGTERM (what `timeout` and a CI cancel send) stops
the run and every process it started, and never changes an earlier result.

``Cancel.installed`` (around the build command's run, in the main thread) makes the first signal set the cancel,
stop the run's descendant processes (a SIGTERM sent to the factory alone reaches no child of its
own accord, and a compile's ninja and compilers are grandchildren) and raise KeyboardInterrupt in
the main thread; a second signal stops at once. From the cancel on no command starts
(``proc.CANCELLED``), and once the build threads are joined ``Cancel.sweep`` stops what the first
sweep missed: the run is a child subreaper, so a grandchild orphaned by its parent's death is
still ours to find. A build whose command died of the cancel is a
cancelled attempt, not a failure (``Cancel.caused``): the manifest keeps what it had for that
variant, the last good wheel with it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from wheelfactory.support import proc
from wheelfactory.support.proc import CommandFailed

# 128 + the signal's number: what a shell reports for a process the signal stopped
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}
# How long a build whose command died of a signal waits to learn that the run was cancelled: the
# children see the signal at the same moment as the factory, whose handler runs a moment later.
SIGNAL_GRACE_S = 2.0
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
# How long a cancel waits for the run's processes to end on SIGTERM before it sends SIGKILL: a
# child that ignores SIGTERM (a test suite that traps it) must not hold the cancel.
KILL_AFTER_S = 10.0


class Cancel:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(signal.Signals(self.signum), 130) if self.signum is not None else 130

    @property
    def described(self) -> str:
        return (
            NAMES.get(signal.Signals(self.signum), f"signal {self.signum}")
            if self.signum is not None
            else "Ctrl-C"
        )

    @contextmanager
    def installed(self) -> Iterator[None]:
        """While in the block, SIGINT and SIGTERM cancel the run (main thread only, as Python's
        signal handlers are); the handlers before it come back after."""
        self.event.clear()
        proc.CANCELLED.clear()
        self.signum = None
        before = {signum: signal.signal(signum, self._handle) for signum in EXIT_CODES}
        reaping = _child_subreaper(True)
        try:
            yield
        finally:
            if reaping:
                _child_subreaper(False)
            for signum, handler in before.items():
                signal.signal(signum, handler)
            proc.CANCELLED.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():  # the second signal: at once, whatever is under way
            stop_descendants(signal.SIGKILL)
            os._exit(EXIT_CODES.get(signal.Signals(signum), 130))
        self.signum = signum
        self.event.set()
        # before the sweep: a command a build thread starts after it is refused
        proc.CANCELLED.set()
        stop_descendants(signal.SIGTERM)
        raise KeyboardInterrupt

    def sweep(self) -> None:
        """Once the build threads are joined: stop what the first sweep missed. A process forked
        while it read /proc, orphaned when its parent died, came back to us (a child subreaper);
        SIGTERM, 2 s, then SIGKILL for what is left."""
        stop_descendants(signal.SIGTERM)
        deadline = time.monotonic() + 2
        while _living(descendants(os.getpid())) and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_descendants(signal.SIGKILL)

    def caused(self, failure: BaseException) -> bool:
        """Whether ``failure`` (a build's) is the cancel's doing: the run is cancelled, or its
        command died of a signal and the cancel follows within SIGNAL_GRACE_S."""
        if self.event.is_set():
            return True
        died_of_signal = isinstance(failure, CommandFailed) and (
            failure.returncode < 0 or failure.returncode in (130, 143)
        )
        return died_of_signal and self.event.wait(SIGNAL_GRACE_S)


CANCEL = Cancel()


def descendants(root: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes under ``root`` (children, their children...), read from ``proc``."""
    children: dict[int, list[int]] = {}
    for stat_file in proc.glob("[0-9]*/stat"):
        try:
            text = stat_file.read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(stat_file.parent.name))
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def _child_subreaper(on: bool) -> bool:
    """Make this process the one orphaned descendants are reparented to (Linux's
    PR_SET_CHILD_SUBREAPER), so that ``Cancel.sweep`` still finds a build's grandchild whose
    parent died; whether it could."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux
        return False


def _living(pids: list[int]) -> list[int]:
    """Those of ``pids`` not yet ended (a zombie, ended and not reaped, is not living)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if state[state.rfind(")") + 2 :][:1] not in ("Z", "X"):
            alive.append(pid)
    return alive


def stop_descendants(signum: int) -> None:
    """Send ``signum`` to every process this one started, and theirs."""
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signum)
        except OSError:
            continue
