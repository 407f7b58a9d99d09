"""Every subprocess the factory runs goes through this module: ``run`` writes the command to the
log first, captures the output there, and a failure raises with the log's tail; ``call`` is for
the few commands whose exit code or separate streams are the answer (a probe, a command the
user sees). Code that tests fake takes a ``runner: Runner = run`` parameter (pypa/build's
``runner=``), so a test passes a function instead of patching this module."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import TimeoutExpired  # re-exported: callers catch it without importing subprocess
from typing import Protocol

from wheelfactory.errors import WheelfactoryError

__all__ = [
    "TAIL_LINES",
    "CommandFailed",
    "Finished",
    "Runner",
    "TimeoutExpired",
    "call",
    "excerpt",
    "run",
    "tail_of",
]

TAIL_LINES = 30


class CommandFailed(WheelfactoryError):
    exit_code = 1

    def __init__(
        self, command: Sequence[str], returncode: int, tail: str, log: Path | None
    ) -> None:
        self.command = list(command)
        self.returncode = returncode
        self.tail = tail
        self.log = log
        where = f" (log: {log})" if log else ""
        super().__init__(f"`{shlex.join(command)}` failed with exit code {returncode}{where}")

    @property
    def last_line(self) -> str:
        """The output's last line, where a tool says why it stopped (without output: this)."""
        return self.tail.strip().splitlines()[-1] if self.tail.strip() else str(self)


_ERROR_LINE = re.compile(r"\berror\b|fatal|undefined reference|No such file", re.IGNORECASE)


def excerpt(text: str, lines: int = TAIL_LINES) -> str:
    """What a person needs from a failed command's output: its first error lines (a compiler's
    real complaint is often far above the tail, under a tool's own summary), then the tail."""
    all_lines = text.splitlines()
    tail = all_lines[-(lines // 2) :]
    errors = [line for line in all_lines[: -len(tail) or None] if _ERROR_LINE.search(line)][
        : lines // 2
    ]
    return "\n".join([*errors, "...", *tail] if errors else all_lines[-lines:])


# Set when the run is cancelled (runner/cancel.py): no command starts after it. A build thread
# between two commands would otherwise start one after the cancel had stopped the others.
CANCELLED = threading.Event()


def _refuse_when_cancelled(command: Sequence[str]) -> None:
    if CANCELLED.is_set():
        raise CommandFailed(command, -signal.SIGTERM, "not started: the run was cancelled", None)


@functools.cache
def _pdeathsig_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig KILL --``: the child is killed when the factory dies, so a kill -9 of
    the factory leaves no orphaned build writing into the output directory (a rerun then owns it
    alone). util-linux's setpriv, not preexec_fn: Python code between fork and exec is unsafe
    with the build threads. Without setpriv (not Linux, util-linux < 2.33) children are not tied."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    probe = subprocess.run(
        [setpriv, "--pdeathsig", "KILL", "--", "true"], capture_output=True, check=False
    )
    return (setpriv, "--pdeathsig", "KILL", "--") if probe.returncode == 0 else ()


def tail_of(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return excerpt(text, lines)


class Runner(Protocol):
    """What runs a command for the code that tests fake: ``run``'s signature and contract (the
    output, stdout and stderr together; CommandFailed on a non-zero exit)."""

    def __call__(
        self,
        command: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
        timeout: float | None = None,
    ) -> str: ...


def _full_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    return {**os.environ, **env} if env is not None else None


def run(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    timeout: float | None = None,
) -> str:
    """Run ``command``; return its output (stdout and stderr together)."""
    _refuse_when_cancelled(command)
    full_env = _full_env(env)
    tied = [*_pdeathsig_prefix(), *command]
    if log is None:
        result = subprocess.run(
            tied,
            cwd=cwd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            tail = excerpt(result.stdout)
            raise CommandFailed(command, result.returncode, tail, None)
        return result.stdout
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as sink:
        sink.write(f"$ {shlex.join(command)}\n")
        if cwd:
            sink.write(f"  (in {cwd})\n")
        sink.flush()
        start = sink.tell()
        logged = subprocess.run(
            tied,
            cwd=cwd,
            env=full_env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    # tell() is a byte offset: slice the bytes (the log holds non-ASCII output, e.g. progress bars).
    output = log.read_bytes()[start:].decode("utf-8", errors="replace")
    if logged.returncode != 0:
        raise CommandFailed(command, logged.returncode, tail_of(log), log)
    return output


@dataclass(frozen=True)
class Finished:
    """How a command ``call`` ran ended: its exit code and what it wrote ("" where not captured)."""

    returncode: int
    stdout: str
    stderr: str


def call(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    input: str | None = None,
    capture: bool = True,
    tied: bool = True,
) -> Finished:
    """Run ``command`` and return how it ended, whatever its exit code (``run`` raises instead).

    ``capture``: stdout and stderr apart (decoded as UTF-8, bad bytes replaced); else they go to
    the factory's own. The child reads ``input``, or nothing: never the factory's stdin.
    ``tied=False`` runs the program itself, not through setpriv, so a missing or unrunnable
    program raises OSError (setpriv would report it as exit code 127 or 126). A command that
    runs past ``timeout`` raises TimeoutExpired."""
    _refuse_when_cancelled(command)
    prefix = _pdeathsig_prefix() if tied else ()
    done = subprocess.run(
        [*prefix, *command],
        cwd=cwd,
        env=_full_env(env),
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=capture,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        check=False,
    )
    return Finished(done.returncode, done.stdout or "", done.stderr or "")
