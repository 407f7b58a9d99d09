"""Where a variant's build time goes: named phases with their seconds, stamped into its build.log
as they end, and kept for the manifest (``phases``) and the build summary (the compile share).
What the phases found (tests, warnings) is the build's result (engines/__init__.py BuildResult).

A phase is timed around a block (``with timeline.phase("smoke"):``) or, when it ran somewhere we
cannot wrap (inside cibuildwheel's container), added from the instants its markers printed
(``add``). A phase that runs twice (two smoke containers) adds up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Printed by commands inside a build container, read back from their output: the phase that
# starts at that instant (seconds since the epoch, the container shares the host's clock).
MARKER = "wheelfactory-phase"


def note(log: Path, text: str) -> None:
    """``# text``: one line of what the factory says in a build log, beside the tools' output."""
    with log.open("a", encoding="utf-8") as sink:
        sink.write(f"# {text}\n")


def marker_command(name: str) -> str:
    """A shell line that prints the marker of phase ``name`` with the current instant."""
    return f'echo "{MARKER} {name} $(date +%s.%N)"'


def markers(output: str) -> list[tuple[str, float]]:
    """The (phase, instant) markers in a command's output, in order; malformed ones are skipped."""
    found = []
    for line in output.splitlines():
        parts = line.strip().split()
        if len(parts) == 3 and parts[0] == MARKER:
            try:
                found.append((parts[1], float(parts[2])))
            except ValueError:
                continue
    return found


def split_by_markers(start: float, end: float, first: str, output: str) -> list[tuple[str, float]]:
    """The phases of a span from ``start`` to ``end`` (wall-clock instants): ``first`` until the first
    marker, then each marked phase until the next marker or ``end``. Clock skew never gives a
    negative phase."""
    bounds = [(first, start), *((name, min(max(at, start), end)) for name, at in markers(output))]
    spans = []
    for (name, at), (_, until) in zip(bounds, [*bounds[1:], ("", end)]):
        spans.append((name, max(0.0, until - at)))
    return spans


class Timeline:
    """One variant's phases. ``observe`` hears each phase's name as it starts (the live view)."""

    def __init__(
        self, log: Path | None = None, observe: Callable[[str], None] | None = None
    ) -> None:
        self.log = log
        self.observe = observe or (lambda _name: None)
        self._phases: dict[str, float] = {}
        # phases started and not ended (audit and smoke run side by side)
        self._running: list[str] = []
        self._left_by: tuple[str, ...] = ()  # the phases under way when the first failure left one
        self._lock = threading.Lock()  # a variant's independent steps may run in threads

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.observe(name)
        self._stamp(f"{name} started")
        start = time.monotonic()
        try:
            with self.span(name):
                yield
        finally:
            self.add(name, time.monotonic() - start)

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        """A stretch named for ``stopped_in`` and not timed: cibuildwheel's run, whose phases are
        timed from the markers its container printed (``add``)."""
        with self._lock:
            self._running.append(name)
        try:
            yield
        except BaseException:
            with self._lock:  # the first failure says where: what else fails then (the outer
                if not self._left_by:  # stretches, a phase beside it) follows from it
                    self._left_by = tuple(self._running)
            raise
        finally:
            with self._lock:
                self._running.remove(name)

    @property
    def stopped_in(self) -> tuple[str, ...]:
        """The phases under way when the first failure (an interrupt, say) left one, in the order
        they started (the audit and the smoke run side by side)."""
        with self._lock:
            return self._left_by

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self._phases[name] = self._phases.get(name, 0.0) + seconds
        self._stamp(f"{name}: {seconds:.1f} s")

    def attach(self, log: Path) -> None:
        """Stamp from now on into ``log``, starting with the phases that ran before it existed."""
        self.log = log
        for name, seconds in self.phases.items():
            self._stamp(f"{name}: {seconds:.1f} s")

    @property
    def phases(self) -> dict[str, float]:
        """Seconds per phase, in the order they first ran, rounded for the manifest."""
        with self._lock:
            return {name: round(seconds, 2) for name, seconds in self._phases.items()}

    def _stamp(self, text: str) -> None:
        if self.log is None:
            return
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a", encoding="utf-8") as sink:
            sink.write(f"# [{time.strftime('%H:%M:%S')}] phase {text}\n")
