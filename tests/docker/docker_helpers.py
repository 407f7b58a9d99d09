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
# The torches that several modules build with, at the build images' default Python: the two above
# (docker_build), and 2.15, which the CUDA, kernel-builder and newest-torch modules share. In LEAN
# runs their wheel sets and prepared environments stay between modules; others go with the module.
SHARED_TORCHES = {("2.6.0", "3.11"), ("2.13.0", "3.11"), ("2.15.0", "3.11")}


def prepared_torch_env(wheelhouse: Path, torch: str, python: str) -> Path | None:
    """A prepared torch environment the Docker builds made for ``torch`` (e.g. "2.6.0") and
    ``python`` (e.g. "cp311-cp311"), if one is there: a `pip --target` tree for PYTHONPATH."""
    from wheelfactory.engines.prepared_env import COMPLETE

    for marker in sorted(wheelhouse.glob(f"envs/torch-*/{COMPLETE}")):
        record = json.loads(marker.read_text())
        if record["python"] == python and record["requirements"] == [f"torch=={torch}"]:
            return marker.parent
    return None


def free_module_wheelhouse(wheelhouse: Path) -> list[Path]:
    """Collect, with the factory's own gc, the wheel sets and prepared environments holding a torch
    not in SHARED_TORCHES: marked unused, then collected as `wheelfactory gc` does. What it removed."""
    from wheelfactory.engines.prepared_env import COMPLETE as ENV_COMPLETE
    from wheelfactory.engines.prepared_env import collect_garbage
    from wheelfactory.engines.wheelhouse import COMPLETE as SET_COMPLETE
    from wheelfactory.engines.wheelhouse import Wheelhouse

    def torch_of(record: dict[str, object]) -> str | None:
        return next((str(r).split("==", 1)[1] for r in record.get("requirements", ())  # type: ignore[attr-defined]
                     if str(r).startswith("torch==")), None)

    for marker in [*wheelhouse.glob(f"sets/*/{SET_COMPLETE}"), *wheelhouse.glob(f"envs/*/{ENV_COMPLETE}")]:
        record = json.loads(marker.read_text())
        request = record.get("request", record)  # a set's record holds its request; an env's is one
        python = request["python"]  # a set's: {"version": "3.11", ...}; an env's: "cp311-cp311"
        version = python["version"] if isinstance(python, dict) else f"{python[2]}.{python[3:].split('-')[0]}"
        torch = torch_of(request)
        if torch is not None and (torch, version) not in SHARED_TORCHES:
            os.utime(marker, (0, 0))  # unused since 1970: what gc collects
    week = 7 * 86400
    removed = [*collect_garbage(wheelhouse / "envs", unused_for_s=week),
               *Wheelhouse(wheelhouse).collect_garbage(unused_for_s=week)]
    return [item.path for item in removed]


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
