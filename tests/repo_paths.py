"""Where the checkout and the tests' build cache are. Imports nothing beyond the standard library
(no pytest), so the benchmarks can use the tests' helpers that need it (rt_assemble,
fusedops_build) in an environment with only wheelfactory, torch, ninja and numpy; testkit
re-exports both names."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where the slow tiers keep what they build (images are the engine's; wheels, wheelhouse, caches
# here): persistent across runs, WHEELFACTORY_TEST_CACHE moves it (a CI clone starts empty).
TEST_CACHE = Path(os.environ.get("WHEELFACTORY_TEST_CACHE", REPO / ".cache" / "tests"))


@contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Held while one test process makes or takes ``path``, a shared thing in the test cache (a
    build's work directory, a venv): the suite runs in several pytest-xdist workers, and two that
    need the same build must not run it at once (the second would find the output locked). The
    second waits, then finds it made. An flock: the kernel drops it when its holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.test-lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
