"""Helpers the docker tests share: the two-ABI matrix, the build command, the manifest reader.
(Fixtures live in conftest.py; plain helpers here, since test modules cannot import conftest.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from testkit import REPO

# Where CI=true (or WHEELFACTORY_REQUIRE_DOCKER=1, which .ci/run exports) what the Docker tier
# needs (the engine, redis-server, chromium) must be there: a test fails instead of skipping.
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("WHEELFACTORY_REQUIRE_DOCKER") == "1"
# WHEELFACTORY_TEST_LEAN=1 (.ci/run sets it): a module frees the GBs its cached venvs hold once it is
# done, since a CI clone reuses nothing and the CUDA builds after it need the disk.
LEAN = os.environ.get("WHEELFACTORY_TEST_LEAN") == "1"
VARIANTS = {"torch26-cxx98-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"}


def matrix_text(offline_build_tables: str, extra: str = "") -> str:
    return f"""
[project]
path = "{REPO / 'kernels' / 'fusedops'}"

[matrix]
torch = ["2.6", "2.13"]
backends = ["cpu"]
{offline_build_tables}{extra}"""


def build_matrix(workdir: Path, matrix_toml: str) -> Path:
    """Write ``matrix.toml`` into ``workdir`` (a persistent test cache dir), build, require success."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "matrix.toml").write_text(matrix_toml)
    result = build(workdir)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    return workdir


def build(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", "build", *args], cwd=workdir, capture_output=True,
                          text=True, timeout=3000)


def manifest(dist: Path) -> dict[str, dict[str, object]]:
    return json.loads((dist / "manifest.json").read_text())["variants"]  # type: ignore[no-any-return]
