"""Where the checkout and the tests' build cache are. Imports nothing beyond the standard library
(no pytest), so the benchmarks can use the tests' helpers that need it (rt_assemble,
fusedops_build) in an environment with only wheelfactory, torch, ninja and numpy; testkit
re-exports both names."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where the slow tiers keep what they build (images are the engine's; wheels, wheelhouse, caches
# here): persistent across runs, WHEELFACTORY_TEST_CACHE moves it (a CI clone starts empty).
TEST_CACHE = Path(os.environ.get("WHEELFACTORY_TEST_CACHE", REPO / ".cache" / "tests"))
